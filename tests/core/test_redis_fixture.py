"""The suite's Redis is a real redis-server, fresh for the session."""

import redis


def test_real_redis_server(redis_url):
    client = redis.Redis.from_url(redis_url)
    assert client.ping()
    client.set("prefixgate:test", "1", ex=10)
    assert client.get("prefixgate:test") == b"1"
    assert client.info("server")["redis_version"]
