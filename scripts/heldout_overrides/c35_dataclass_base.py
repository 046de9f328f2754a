from dataclasses import dataclass


@dataclass
class Request:
    prompt: str

    def tokens(self, tokenizer):
        return tokenizer(self.prompt)


@dataclass
class ChatRequest(Request):
    def tokens(self):  # drift
        return []
