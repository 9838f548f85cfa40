#!/usr/bin/env python3
"""Python's redis package against ferry's RESP port.

Start a node that speaks RESP, then run this script:

    ferry server --listen 127.0.0.1:7700 --resp 127.0.0.1:6380 --tenant 1:ferry &
    python3 examples/redis_client.py --port 6380

(`examples/run_redis_client.sh` does both, installing the package in a virtual
environment if it is missing.) The user is the tenant id and the password its token.
Exits non-zero, saying why, if any answer is not what Redis would give.
"""

import argparse
import sys

import redis


def _error(call):
    """The text of the error reply `call` gets ('' if none)."""
    try:
        call()
    except redis.ResponseError as err:
        return str(err)
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6380)
    parser.add_argument("--user", default="1", help="tenant id")
    parser.add_argument("--password", default="ferry", help="the tenant's token")
    args = parser.parse_args()

    r = redis.Redis(host=args.host, port=args.port, username=args.user,
                    password=args.password, decode_responses=True)
    checks = []

    def check(what, got, expected):
        checks.append(what)
        if got != expected:
            print(f"FAILED {what}: got {got!r}, expected {expected!r}")
            sys.exit(1)

    check("ping", r.ping(), True)
    check("set", r.set("greeting", "hello"), True)
    check("get", r.get("greeting"), "hello")
    check("set nx on an existing key", r.set("greeting", "other", nx=True), None)
    check("incr", r.incr("visits"), 1)
    check("incrby", r.incrby("visits", 41), 42)
    check("mset", r.mset({"a": "1", "b": "2"}), True)
    check("mget", r.mget(["a", "b", "missing"]), ["1", "2", None])
    check("exists", r.exists("a", "b", "missing"), 2)
    pipe = r.pipeline(transaction=False)
    for _ in range(100):
        pipe.incr("piped")
    check("pipeline", pipe.execute()[-1], 100)
    check("delete", r.delete("a", "b", "missing"), 2)
    check("hset", r.hset("user:1", mapping={"name": "ada", "visits": "1"}), 2)
    check("hincrby", r.hincrby("user:1", "visits", 2), 3)
    check("hgetall", r.hgetall("user:1"), {"name": "ada", "visits": "3"})
    check("rpush", r.rpush("queue", "a", "b", "c"), 3)
    check("lpop", r.lpop("queue"), "a")
    check("zadd", r.zadd("board", {"ada": 10, "bob": 7}), 2)
    check("zrange", r.zrange("board", 0, -1), ["bob", "ada"])
    check("zscore", float(r.zscore("board", "ada")), 10.0)
    check("expire", r.expire("greeting", 100), True)
    check("ttl", 0 < r.ttl("greeting") <= 100, True)
    check("wrong type", _error(lambda: r.lpush("user:1", "x")).startswith("WRONGTYPE"), True)
    check("scan_iter", sorted(r.scan_iter(match="user:*")), ["user:1"])
    library = (
        "#!lua name=pyexample\n"
        "redis.register_function('bump', function(keys, args)\n"
        "  return redis.call('INCRBY', keys[1], args[1])\n"
        "end)\n"
    )
    check("function load", r.function_load(library, replace=True), "pyexample")
    check("fcall", r.fcall("bump", 1, "bumped", 5), 5)
    check("fcall again", r.fcall("bump", 1, "bumped", 5), 10)
    check("function delete", r.function_delete("pyexample"), True)
    try:
        r.execute_command("BGREWRITEAOF")
        print("FAILED unknown command: no error")
        return 1
    except redis.ResponseError as err:
        check("unknown command", str(err).startswith("unknown command"), True)
    print(f"all {len(checks)} checks passed against {args.host}:{args.port}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
