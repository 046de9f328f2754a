"""Facts read from one file: signatures, call sites, guards, decorators, escapes and the text scans, and the codec of their tuples."""
