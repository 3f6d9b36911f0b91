#!/usr/bin/env python3
"""
bench/delay_proxy.py - a TCP relay that holds every piece it forwards for
half a round trip each way: a database "across the network" on a machine
whose loopback has no netem (bench/fleet_db.py --db-rtt). Its own process
(pinned to the load core), so that it takes nothing from the clients'
interpreter; what a side sends reaches the other side one-way delay
later, in order.

    delay_proxy.py HOST PORT RTT_MS LISTEN_PORT
"""
import asyncio
import selectors
import sys


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            loop.call_later(delay, writer.write, data)
    except (ConnectionError, OSError):
        pass
    loop.call_later(delay, writer.close)


async def main(host, port, rtt_ms, listen):
    delay = rtt_ms / 2000.0

    async def conn(cr, cw):
        try:
            ur, uw = await asyncio.open_connection(host, port)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pump(cr, uw, delay), pump(ur, cw, delay))

    server = await asyncio.start_server(conn, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    # select(2) waits to the microsecond; asyncio's epoll selector rounds
    # every wait up to a whole millisecond (0.25 ms would be held 1 ms).
    # Measured through it with 0.5: a 1-byte echo's round trip 0.72 ms p50.
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    loop.run_until_complete(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]),
                                 int(sys.argv[4])))
