/* The call tree the flame graph and the folded stacks are made from: the
 * samples' stacks merged by common prefix (one node per distinct path from
 * the root), each node's children ordered for output, and a depth-first
 * walk that keeps its own stack.
 *
 * Nothing here recurses: a stack is as deep as the profile says (up to
 * CLI_VIEW_MAX_DEPTH frames), and a recursion per level put the command's
 * own stack at the mercy of its input. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

/* ---- building ---------------------------------------------------------------------- */

/* splitmix64's finalizer: every bit of (parent, name) reaches the low bits
 * the table uses. (A bare multiply left them to the name alone, so a deep
 * chain of one name, as in a recursion, probed one run of slots: a profile
 * of 8192 samples 4096 frames deep took a minute.) */
static uint64_t hash_edge(uint32_t parent, uint32_t name) {
  uint64_t h = (uint64_t)parent << 32 | name;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

static uint64_t hash_node(size_t i, const void *ctx) {
  const cli_tree *t = ctx;
  return hash_edge(t->v[i].parent, t->v[i].name);
}

/* Room for one more node; the root (node 0) is not indexed. */
static int reserve_slot(cli_tree *t) {
  return cli_slots_reserve(&t->slots, t->n, 4096, 1, hash_node, t) != 0 ? -ENOMEM : 0;
}

/* The child of parent called name, created if new; UINT32_MAX on OOM. */
static uint32_t child(cli_tree *t, uint32_t parent, uint32_t name) {
  if (reserve_slot(t) != 0)
    return UINT32_MAX;
  size_t j = cli_slots_at(&t->slots, hash_edge(parent, name));
  for (; t->slots.v[j]; j = cli_slots_next(&t->slots, j)) {
    const cli_tree_node *c = &t->v[t->slots.v[j] - 1];
    if (c->parent == parent && c->name == name)
      return t->slots.v[j] - 1;
  }
  if (t->n == t->cap) {
    size_t nc = t->cap * 2;
    cli_tree_node *nv = realloc(t->v, nc * sizeof *nv);
    if (nv == NULL)
      return UINT32_MAX;
    t->v = nv;
    t->cap = nc;
  }
  uint32_t id = (uint32_t)t->n++;
  t->v[id] = (cli_tree_node){name, parent, 0, 0};
  t->slots.v[j] = id + 1;
  return id;
}

static int tree_add(void *ctx, const uint32_t *st, size_t n, int64_t value) {
  cli_tree *t = ctx;
  uint32_t at = 0;
  t->v[0].value = cli_add(t->v[0].value, value);
  for (size_t i = 0; i < n; i++) {
    /* Names are shifted by one: 0 is the root's "all". */
    at = child(t, at, st[i] + 1);
    if (at == UINT32_MAX)
      return -ENOMEM;
    t->v[at].value = cli_add(t->v[at].value, value);
  }
  t->v[at].self = cli_add(t->v[at].self, value);
  return 0;
}

int cli_tree_build(cli_tree *t, const cli_profile *cp) {
  memset(t, 0, sizeof *t);
  t->cap = 1024;
  t->v = malloc(t->cap * sizeof *t->v);
  if (t->v == NULL)
    return -ENOMEM;
  t->v[0] = (cli_tree_node){0, UINT32_MAX, 0, 0};
  t->n = 1;
  if (reserve_slot(t) != 0)
    return -ENOMEM;
  int rc = cli_profile_stacks(cp, tree_add, t);
  return rc < 0 ? rc : rc != 0 ? -ENOMEM : 0;
}

void cli_tree_free(cli_tree *t) {
  free(t->v);
  free(t->slots.v);
  free(t->kids);
  free(t->kid_at);
  memset(t, 0, sizeof *t);
}

/* ---- ordering ---------------------------------------------------------------------- */

/* qsort has no context argument; the command is single-threaded. */
static const cli_tree *g_tree;
static const cli_profile *g_cp;

static int cmp_name(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  int c = strcmp(g_cp->names[g_tree->v[x].name - 1], g_cp->names[g_tree->v[y].name - 1]);
  return c ? c : x < y ? -1 : x > y;
}

static int cmp_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  int64_t vx = g_tree->v[x].value, vy = g_tree->v[y].value;
  if (vx != vy)
    return vx > vy ? -1 : 1;
  return cmp_name(a, b);
}

int cli_tree_order(cli_tree *t, const cli_profile *cp, int order) {
  free(t->kids);
  free(t->kid_at);
  t->kids = malloc(t->n * sizeof *t->kids);
  t->kid_at = calloc(t->n + 1, sizeof *t->kid_at);
  if (t->kids == NULL || t->kid_at == NULL)
    return -ENOMEM;
  /* Count each node's children, turn the counts into start offsets, then
   * place each child (a node's parent always comes before it). */
  for (size_t i = 1; i < t->n; i++)
    t->kid_at[t->v[i].parent + 1]++;
  for (size_t i = 0; i < t->n; i++)
    t->kid_at[i + 1] += t->kid_at[i];
  uint32_t *fill = malloc(t->n * sizeof *fill);
  if (fill == NULL)
    return -ENOMEM;
  memcpy(fill, t->kid_at, t->n * sizeof *fill);
  for (size_t i = 1; i < t->n; i++)
    t->kids[fill[t->v[i].parent]++] = (uint32_t)i;
  free(fill);
  g_tree = t;
  g_cp = cp;
  for (size_t i = 0; i < t->n; i++) {
    size_t nk = t->kid_at[i + 1] - t->kid_at[i];
    if (nk > 1)
      qsort(t->kids + t->kid_at[i], nk, sizeof *t->kids,
            order == CLI_TREE_BY_NAME ? cmp_name : cmp_value);
  }
  return 0;
}

/* ---- walking ----------------------------------------------------------------------- */

int cli_tree_walk(const cli_tree *t, cli_tree_visit v) {
  /* path[d] is the node at depth d; next[d] the index of its next child
   * to visit. A path is at most CLI_VIEW_MAX_DEPTH frames below the root,
   * but the tree itself says how deep it is, so size by that. */
  size_t cap = 64;
  uint32_t *path = malloc(cap * sizeof *path), *next = malloc(cap * sizeof *next);
  int rc = 0;
  if (path == NULL || next == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  size_t d = 0;
  path[0] = 0;
  next[0] = t->kid_at[0];
  if ((rc = v.enter(v.ctx, t, path, 0)) != 0)
    goto out;
  for (;;) {
    uint32_t at = path[d];
    if (next[d] < t->kid_at[at + 1]) {
      uint32_t c = t->kids[next[d]++];
      if (d + 1 == cap) {
        size_t nc = cap * 2;
        uint32_t *np = realloc(path, nc * sizeof *np);
        if (np != NULL)
          path = np;
        uint32_t *nn = np ? realloc(next, nc * sizeof *nn) : NULL;
        if (nn == NULL) {
          rc = -ENOMEM;
          goto out;
        }
        next = nn;
        cap = nc;
      }
      path[++d] = c;
      next[d] = t->kid_at[c];
      if ((rc = v.enter(v.ctx, t, path, d)) != 0)
        goto out;
      continue;
    }
    if ((rc = v.leave(v.ctx, t, at)) != 0 || d == 0)
      goto out;
    d--;
  }
out:
  free(path);
  free(next);
  return rc;
}
