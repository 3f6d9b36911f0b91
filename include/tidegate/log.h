/*
 * log.h - JSON-lines logging: one object per line with ts, level, event
 * and typed fields. Values are escaped by yajl; callers must never pass
 * secrets (tokens, passwords, keys) as fields.
 */
#ifndef TIDEGATE_LOG_H
#define TIDEGATE_LOG_H

#include <stdio.h>

enum tg_log_level { TG_LOG_DEBUG, TG_LOG_INFO, TG_LOG_WARN, TG_LOG_ERROR, TG_LOG_OFF };

struct tg_log_kv {
	const char *k;
	char type;		/* 's' string, 'i' integer, 'f' double */
	const char *s;
	long long i;
	double f;
};

#define TG_LS(k, v) ((struct tg_log_kv){ (k), 's', (v), 0, 0 })
#define TG_LI(k, v) ((struct tg_log_kv){ (k), 'i', NULL, (long long)(v), 0 })
#define TG_LF(k, v) ((struct tg_log_kv){ (k), 'f', NULL, 0, (double)(v) })

/** Send logs to out (borrowed; default stderr) at or above min. */
void tg_log_init(FILE *out, enum tg_log_level min);
/** The least level written from now on (log_level on a reload). */
void tg_log_set_level(enum tg_log_level min);
/** Parse "debug|info|warn|error|off" (s borrowed); -1 when unknown. */
int tg_log_level_parse(const char *s);
int tg_log_enabled(enum tg_log_level lvl);
/** Write one line; kv is terminated by an entry with k == NULL. event and kv
 * (with its strings) are borrowed. */
void tg_log_kvs(enum tg_log_level lvl, const char *event, const struct tg_log_kv *kv);

#define tg_log(lvl, ev, ...) \
	tg_log_kvs((lvl), (ev), (const struct tg_log_kv[]){ __VA_ARGS__, { NULL, 0, NULL, 0, 0 } })

#endif
