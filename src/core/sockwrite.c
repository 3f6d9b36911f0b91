/*
 * sockwrite.c - a plain socket's bufferevent output written at once,
 * instead of when EV_WRITE fires a loop turn later (an epoll_ctl to arm
 * it, an epoll_wait, the write, an epoll_ctl to disarm). Written whole,
 * EV_WRITE is turned off before the loop sees it (with the epoll
 * changelist the enable and the disable cancel out); what the socket does
 * not take, or an error, is left to the bufferevent.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "tidegate/sockwrite.h"

int
tg_bev_write_now(struct bufferevent *bev)
{
	struct evbuffer *out = bufferevent_get_output(bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	int n;

	if (fd < 0)
		return 0;
	/* A bufferevent keeps its output's start frozen outside its own
	 * writes: thawed for this one. */
	evbuffer_unfreeze(out, 1);
	n = evbuffer_write(out, fd);
	evbuffer_freeze(out, 1);
	if (n < 0 || evbuffer_get_length(out) > 0)
		return 0;
	bufferevent_disable(bev, EV_WRITE);
	return 1;
}
