class Attention:
    def forward(self, query, key, value):
        return query, key, value


class FlashAttention(Attention):
    def forward(self, query, value, key):  # drift
        return query, key, value
