/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput over every file of
 * the corpus directories (or files) given as arguments, without libFuzzer.
 * scripts/test replays each seed corpus this way under ASan+UBSan; the
 * libFuzzer build (meson -Dfuzz=true with clang) links the targets without
 * this file. An empty seed is passed as (NULL, 0), the shape of an empty
 * request body in the gateway.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
		if (f)
			fclose(f);
		fprintf(stderr, "cannot read %s\n", path);
		return -1;
	}
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	/* An empty file is fed as NULL: an empty evbuffer's pullup is NULL too. */
	LLVMFuzzerTestOneInput(n > 0 ? buf : NULL, (size_t)n);
	free(buf);
	return 0;
}

static int
run_path(const char *path, int *count)
{
	struct dirent *e;
	struct stat st;
	char sub[4096];
	DIR *d;
	int rc = 0;

	if (stat(path, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((e = readdir(d)) != NULL && rc == 0) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		rc = run_path(sub, count);
	}
	closedir(d);
	return rc;
}

int
main(int argc, char **argv)
{
	int i, count = 0;

	for (i = 1; i < argc; i++)
		if (run_path(argv[i], &count) != 0)
			return 1;
	printf("replayed %d inputs\n", count);
	return count > 0 ? 0 : 1;
}
