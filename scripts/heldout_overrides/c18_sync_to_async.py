class Engine:
    def step(self):
        return None


class AsyncEngine(Engine):
    async def step(self):  # drift
        return None
