import logging


class ListHandler(logging.Handler):
    def emit(self):  # drift
        return None
