class Handlers:
    class Base:
        def on_event(self, event, payload):
            return event, payload

    class Printer(Base):
        def on_event(self, event):  # drift
            return event
