import json


class TensorEncoder(json.JSONEncoder):
    def default(self, obj, depth):  # drift
        return str(obj)
