class Codec:
    @staticmethod
    def decode(payload):
        return payload


class GzipCodec(Codec):
    def decode(self, payload):  # drift
        return payload
