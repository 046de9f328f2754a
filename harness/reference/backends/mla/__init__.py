"""The MLA backend family: a common builder and its FlashMLA / ROCm AITER subclasses."""
