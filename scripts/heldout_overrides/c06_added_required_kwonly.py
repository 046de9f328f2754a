class Tokenizer:
    def encode(self, text):
        return text


class ChatTokenizer(Tokenizer):
    def encode(self, text, *, template):  # drift
        return text, template
