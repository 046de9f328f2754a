class Client:
    async def fetch(self, url):
        return url


class CachedClient(Client):
    def fetch(self, url):  # drift
        return url
