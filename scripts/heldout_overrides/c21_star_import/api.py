class Handler:
    def handle(self, request, context):
        return request, context
