import threading


class Worker(threading.Thread):
    def run(self, job):  # drift
        return job
