/*
 * job_key.h - the folded form of a job id (correlationId) under which
 * every state backend stores and looks up correlation ownership, so that
 * no spelling a vendor reads as the same job escapes its owner. Private to
 * src/state/ (job_key.c); used by sqlite/owners.c and pg/pg_shared.c.
 */
#ifndef TG_STATE_JOB_KEY_H
#define TG_STATE_JOB_KEY_H

/**
 * The folded form of cid (borrowed): spaces and tabs around it dropped,
 * ASCII letters lower-cased, and an id of 32 hex digits once '-', '{',
 * '}', '(' and ')' are left out reduced to those digits. malloc'd: the
 * caller takes ownership (free()).
 */
char *tg_state_job_key(const char *cid);

#endif
