class Scheduler:
    def schedule(self, requests, budget):
        return requests, budget


class FCFSScheduler(Scheduler):
    def schedule(self, requests):  # drift
        return requests
