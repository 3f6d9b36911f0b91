/*
 * sockwrite.h - a bufferevent's output written in the caller's loop turn
 * (http.c's answers, the upstream pool's requests).
 */
#ifndef TIDEGATE_SOCKWRITE_H
#define TIDEGATE_SOCKWRITE_H

struct bufferevent;

/**
 * Write what bev's (borrowed; a plain socket's, never TLS: the caller
 * checks) output holds now. 1 when all of it went: EV_WRITE is then off
 * again before the loop sees it, and the caller runs what the write
 * callback would have. 0 when some is left, or on an error: the
 * bufferevent writes the rest and reports the error as before.
 */
int tg_bev_write_now(struct bufferevent *bev);

#endif
