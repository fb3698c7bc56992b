/* lpf_sync and the message queue, in a section and in LPF_ROOT: LPF_SYNC_DEFAULT held in an
 * lpf_sync_attr_t and LPF_MSG_DEFAULT in an lpf_msg_attr_t; empty supersteps; the capacity of
 * lpf_resize_message_queue, in force after the next lpf_sync, counting puts and gets together
 * and renewed every superstep; a request beyond it returns LPF_ERR_OUT_OF_MEMORY and is not
 * performed (its destination keeps its bytes); growing, shrinking, zero; an impossible resize
 * fails without effect, leaving the last successful one pending. */
#include <lpf/core.h>
#include <stdint.h>
#include "check.h"

#define W 8
#define UNTOUCHED (-1L)

static long val(lpf_pid_t pid, int i) { return (long)pid * 1000 + i; }

struct state {
    lpf_t ctx;
    lpf_pid_t pid, next, prev;
    lpf_sync_attr_t sync_attr;
    lpf_msg_attr_t msg_attr;
    lpf_memslot_t s_dst, s_src, s_local;
    long dst[W], src[W], local[2 * W]; /* local: put sources, then get destinations */
    const char *where;
};

static void sync_ok(struct state *s) {
    CHECK(lpf_sync(s->ctx, s->sync_attr) == LPF_SUCCESS, "%s: sync", s->where);
}

/* Issues n requests, alternately a put of local[i] to the next process's dst[i] and a get of
 * the previous process's src[i] into local[W + i], and expects the first `capacity` of them to
 * be accepted; then syncs and checks that exactly those happened. */
static void requests(struct state *s, int n, int capacity, int line) {
    for (int i = 0; i < W; i++) {
        s->dst[i] = UNTOUCHED;
        s->local[W + i] = UNTOUCHED;
    }
    sync_ok(s); /* nobody puts into dst before it is reset */
    for (int i = 0; i < n; i++) {
        lpf_err_t rc = i % 2 == 0
            ? lpf_put(s->ctx, s->s_local, i * sizeof(long), s->next, s->s_dst, i * sizeof(long),
                      sizeof(long), s->msg_attr)
            : lpf_get(s->ctx, s->prev, s->s_src, i * sizeof(long), s->s_local,
                      (W + i) * sizeof(long), sizeof(long), s->msg_attr);
        lpf_err_t want = i < capacity ? LPF_SUCCESS : LPF_ERR_OUT_OF_MEMORY;
        CHECK(rc == want, "%s, line %d: request %d of %d with capacity %d returned %d", s->where,
              line, i, n, capacity, rc);
    }
    sync_ok(s);
    for (int i = 0; i < W; i++) {
        int done = i < n && i < capacity;
        if (i % 2 == 0)
            CHECK(s->dst[i] == (done ? val(s->prev, i) : UNTOUCHED),
                  "%s, line %d: put %d: %ld", s->where, line, i, s->dst[i]);
        else
            CHECK(s->local[W + i] == (done ? val(s->prev, 100 + i) : UNTOUCHED),
                  "%s, line %d: get %d: %ld", s->where, line, i, s->local[W + i]);
    }
}

static void queue(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, const char *where) {
    struct state st = {ctx, pid, (pid + 1) % p, (pid + p - 1) % p, LPF_SYNC_DEFAULT,
                       LPF_MSG_DEFAULT, 0, 0, 0, {0}, {0}, {0}, where};
    struct state *s = &st;
    for (int i = 0; i < W; i++) {
        s->src[i] = val(pid, 100 + i);
        s->local[i] = val(pid, i);
    }
    for (int i = 0; i < 20; i++) sync_ok(s); /* empty supersteps */
    CHECK(lpf_resize_memory_register(ctx, 3) == LPF_SUCCESS, "%s: resize", where);
    CHECK(lpf_resize_message_queue(ctx, 3) == LPF_SUCCESS, "%s: resize", where);
    sync_ok(s);
    CHECK(lpf_register_global(ctx, s->dst, sizeof s->dst, &s->s_dst) == LPF_SUCCESS, "register");
    CHECK(lpf_register_global(ctx, s->src, sizeof s->src, &s->s_src) == LPF_SUCCESS, "register");
    CHECK(lpf_register_local(ctx, s->local, sizeof s->local, &s->s_local) == LPF_SUCCESS, "register");
    sync_ok(s);

    requests(s, 5, 3, __LINE__); /* puts and gets count together */
    requests(s, 3, 3, __LINE__); /* and the capacity is there again in the next superstep */

    /* Growing takes effect after the next sync: this superstep still has 3. */
    for (int i = 0; i < W; i++) s->dst[i] = UNTOUCHED;
    sync_ok(s);
    CHECK(lpf_resize_message_queue(ctx, 6) == LPF_SUCCESS, "%s: grow", where);
    for (int i = 0; i < 4; i++) {
        lpf_err_t rc = lpf_put(ctx, s->s_local, i * sizeof(long), s->next, s->s_dst,
                               i * sizeof(long), sizeof(long), s->msg_attr);
        CHECK(rc == (i < 3 ? LPF_SUCCESS : LPF_ERR_OUT_OF_MEMORY), "%s: put %d before the sync "
              "that grows the queue: %d", where, i, rc);
    }
    sync_ok(s);
    for (int i = 0; i < 4; i++)
        CHECK(s->dst[i] == (i < 3 ? val(s->prev, i) : UNTOUCHED), "%s: put %d", where, i);
    requests(s, 8, 6, __LINE__);

    /* An impossible resize fails and changes nothing. */
    CHECK(lpf_resize_message_queue(ctx, SIZE_MAX / 10) == LPF_ERR_OUT_OF_MEMORY, "%s: huge", where);
    sync_ok(s);
    requests(s, 8, 6, __LINE__);

    /* Shrinking succeeds; a failed resize after it leaves it pending. */
    CHECK(lpf_resize_message_queue(ctx, 1) == LPF_SUCCESS, "%s: shrink", where);
    CHECK(lpf_resize_message_queue(ctx, SIZE_MAX / 10) == LPF_ERR_OUT_OF_MEMORY, "%s: huge", where);
    sync_ok(s);
    requests(s, 3, 1, __LINE__);

    /* Zero: no request at all. */
    CHECK(lpf_resize_message_queue(ctx, 0) == LPF_SUCCESS, "%s: zero", where);
    sync_ok(s);
    requests(s, 2, 0, __LINE__);

    lpf_deregister(ctx, s->s_dst);
    lpf_deregister(ctx, s->s_src);
    lpf_deregister(ctx, s->s_local);
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    queue(ctx, pid, p, "section");
}

int main(void) {
    queue(LPF_ROOT, 0, 1, "LPF_ROOT");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
