/* MLPerf logging: one ':::MLLOG {json}' line per event, rank 0 only (docs/references.md,
   "MLPerf logging").  Every line is flushed and its write checked: a full disk ends the run
   with a message instead of leaving a log that stops short. */
#ifndef CF_MLLOG_H
#define CF_MLLOG_H

static FILE *mll_file;
static const char *mll_path;

/* opens path for the run: a resumed run appends to its log; a new one keeps the previous
   log of that name as path.prev */
TOOL_UNUSED static void mll_open(const char *path, int resumed) {
    char prev[4200];
    if (!path || cf_dist_rank() != 0) return;
    if (!resumed && access(path, F_OK) == 0) {
        snprintf(prev, sizeof prev, "%s.prev", path);
        if (rename(path, prev)) die("--mllog %s: cannot keep the earlier log as %s (%s)", path, prev, strerror(errno));
    }
    if (!(mll_file = fopen(path, resumed ? "a" : "w"))) die("--mllog %s: %s", path, strerror(errno));
    mll_path = path;
}
/* one event: type INTERVAL_START, INTERVAL_END or POINT_IN_TIME; value is JSON text; meta
   (JSON members, may be NULL) joins the file and line */
TOOL_UNUSED static void mll(const char *event, const char *key, const char *value, int lineno, const char *meta) {
    struct timespec t;
    if (!mll_file) return;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(mll_file, ":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", \"key\": \"%s\", \"value\": %s, "
            "\"metadata\": {\"file\": \"cf_train.c\", \"lineno\": %d%s%s}}\n",
            (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000, event, key, value, lineno, meta ? ", " : "", meta ? meta : "");
    if (fflush(mll_file) || ferror(mll_file)) die("--mllog %s: write failed (%s)", mll_path, strerror(errno));
}
#define MLL_EVENT(key, value) mll("POINT_IN_TIME", key, value, __LINE__, NULL)
#define MLL_START(key, meta) mll("INTERVAL_START", key, "null", __LINE__, meta)
#define MLL_END(key, meta) mll("INTERVAL_END", key, "null", __LINE__, meta)
/* a metric as a JSON number: a non-finite one is an error (JSON has no NaN) */
TOOL_UNUSED static const char *mll_number(char *buf, size_t n, double v) {
    if (!isfinite(v)) die("internal: a non-finite value %g for the MLPerf log", v);
    snprintf(buf, n, "%.6g", v);
    return buf;
}
TOOL_UNUSED static void mll_close(void) {
    if (mll_file && fclose(mll_file)) die("--mllog %s: write failed (%s)", mll_path, strerror(errno));
    mll_file = NULL;
}
#endif
