from abc import ABC, abstractmethod


class Builder(ABC):
    @abstractmethod
    def build(self, common_prefix_len, common_attn_metadata):
        raise NotImplementedError


class FlashBuilder(Builder):
    def build(self, common_prefix_len, metadata):  # drift
        return common_prefix_len, metadata
