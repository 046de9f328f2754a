from typing import overload


class Parser:
    @overload
    def parse(self, text: str) -> str: ...
    @overload
    def parse(self, text: bytes) -> bytes: ...
    def parse(self, text):
        return text


class LenientParser(Parser):
    def parse(self, data):  # drift
        return data
