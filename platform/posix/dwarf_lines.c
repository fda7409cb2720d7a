/* Source lines and inline frames from DWARF through elfutils' libdw: the
 * source-lines reader of core/platform.h on Linux and FreeBSD.
 *
 * Divisions: the images (a snapshot of the loaded objects, each given its
 * own libdwfl session the first time an address falls in it, so an image
 * nobody sampled costs nothing); the lookup (the compilation unit of an
 * address, its line from pprt's line-program interpreter, then the DIE
 * scopes around it for the inline chain).
 *
 * Memory: addresses come in increasing order (core/platform.h), so only
 * the current unit's function index and line-program cursor are kept, not
 * libdw's expanded line tables (dwarf_getsrclines keeps every row of every
 * unit touched until the session ends: 15 MB of a 10,000-address profile's
 * 42 MB peak). libdw's table remains the fallback for a unit whose line
 * program pprt does not read.
 *
 * libdwfl rather than libdw alone because it does most of the finding
 * (separate debug files by build id under each debug directory; the
 * .gnu_debuglink search is pprt's, see find_debuginfo), compressed
 * sections, and a file's own bias. Runs at write time only (the
 * CPU reader, heap and trace writers), never in a signal handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "core/platform.h"
#include "core/syscalls.h"
#include "platform/posix/dwarf_lineprog.h"
#include "platform/posix/dwarf_scopes.h"
#include "platform/posix/elf.h"
#include "platform/posix/lines_images.h"

/* ---- images -------------------------------------------------------------------- */

typedef struct lines_image {
  Dwfl *dwfl;
  Dwfl_Module *mod;
  int tried;      /* dwfl is set up, or setting it up failed once */
  Dwarf *secs_of; /* the debug information secs was read from */
  pprt__dw_sections secs;
} lines_image;

/* The unit of the previous address: its functions and its line program.
 * Addresses come sorted, so a unit is done when the next address is in
 * another, and only one is kept. */
typedef struct lines_unit {
  Dwarf *dbg; /* NULL for none */
  Dwarf_Off off;
  int has_lp; /* 0: libdw's line table for this unit */
  pprt__dw_cu_index ix;
  pprt__dw_lineprog lp;
  const char *comp_dir;
} lines_unit;

struct pprt__os_lines {
  pprt__lines_images images; /* a lines_image per object */
  pprt__lines_strings strings;
  char *debuginfo_path;
  Dwfl_Callbacks cb;
  lines_unit unit;
};

/* Where libdwfl looks for separate debug files: the caller's directories,
 * then its default (the file's own directory, its .debug subdirectory and
 * /usr/lib/debug). Absolute entries are searched by build id too. */
static char *debug_path(const char *dirs) {
  static const char system_dirs[] = ":.debug:/usr/lib/debug";
  size_t n = dirs && *dirs ? strlen(dirs) + 1 : 0;
  char *p = malloc(n + sizeof system_dirs);
  if (p == NULL)
    return NULL;
  if (n) {
    memcpy(p, dirs, n - 1);
    p[n - 1] = ':';
  }
  memcpy(p + n, system_dirs, sizeof system_dirs);
  /* A leading '+' or '-' would be read as libdwfl's checksum flag. */
  if (p[0] == '+' || p[0] == '-')
    p[0] = ':';
  return p;
}

/* Opens path for libdwfl when it is a readable file: its name goes to
 * *found (malloc'd, libdwfl frees it). */
static int open_debug(const char *path, char **found) {
  int fd = pprt__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd >= 0 && (*found = strdup(path)) == NULL) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Separate debug files: by build id under each directory of the path
 * (libdwfl's own search), then by .gnu_debuglink next to the file, in its
 * .debug directory, and under each absolute directory of the path followed
 * by the file's directory (/usr/lib/debug/usr/bin/x.debug). Not
 * dwfl_standard_find_debuginfo: where nothing is found it asks debuginfod
 * servers when DEBUGINFOD_URLS is set, and a profile written at exit must
 * not wait on the network. The module's user data is the reader. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink, GElf_Word crc,
                          char **found) {
  int fd =
      dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink, crc, found);
  if (fd >= 0 || debuglink == NULL || file_name == NULL || strchr(debuglink, '/') != NULL)
    return fd;
  const pprt__os_lines *l = *userdata;
  const char *slash = strrchr(file_name, '/');
  int dirlen = slash ? (int)(slash - file_name) : 0;
  char path[4096];
  if (snprintf(path, sizeof path, "%.*s/%s", dirlen, file_name, debuglink) < (int)sizeof path &&
      strcmp(path, file_name) != 0)
    fd = open_debug(path, found);
  if (fd < 0 && snprintf(path, sizeof path, "%.*s/.debug/%s", dirlen, file_name, debuglink) <
                    (int)sizeof path)
    fd = open_debug(path, found);
  for (const char *d = l ? l->debuginfo_path : ""; fd < 0 && *d;) {
    size_t n = strcspn(d, ":");
    if (d[0] == '/' && snprintf(path, sizeof path, "%.*s%.*s/%s", (int)n, d, dirlen, file_name,
                                debuglink) < (int)sizeof path)
      fd = open_debug(path, found);
    d += n + (d[n] == ':');
  }
  return fd;
}

static int image_used(const void *img) {
  return ((const lines_image *)img)->tried;
}

static void image_release(void *element) {
  lines_image *img = element;
  if (img->dwfl)
    dwfl_end(img->dwfl);
}

int pprt__os_lines_open(pprt__os_lines **out, const char *debug_dirs) {
  *out = NULL;
  pprt__os_lines *l = calloc(1, sizeof *l);
  if (l == NULL)
    return -ENOMEM;
  int rc = pprt__lines_images_open(&l->images, sizeof(lines_image), image_used);
  if (rc != 0) {
    free(l);
    return rc;
  }
  l->debuginfo_path = debug_path(debug_dirs);
  if (l->debuginfo_path == NULL) {
    pprt__os_lines_close(l);
    return -ENOMEM;
  }
  l->cb.find_elf = dwfl_build_id_find_elf;
  l->cb.find_debuginfo = find_debuginfo;
  l->cb.section_address = dwfl_offline_section_address;
  l->cb.debuginfo_path = &l->debuginfo_path;
  *out = l;
  return 0;
}

static void unit_free(lines_unit *u) {
  pprt__dw_index_free(&u->ix);
  pprt__dw_lineprog_free(&u->lp);
  memset(u, 0, sizeof *u);
}

void pprt__os_lines_close(pprt__os_lines *l) {
  if (l == NULL)
    return;
  unit_free(&l->unit);
  pprt__lines_images_close(&l->images, image_release);
  pprt__lines_strings_free(&l->strings);
  free(l->debuginfo_path);
  free(l);
}

/* The libdwfl module of the image holding addr, set up on first use; NULL
 * for an address in no image, the vDSO (no file) or a file libdwfl refuses. */
static Dwfl_Module *module_for(pprt__os_lines *l, uintptr_t addr, lines_image **imgp) {
  long i = pprt__lines_image_of(&l->images, addr);
  if (i < 0)
    return NULL;
  const pprt__elf_object *obj = &l->images.snap.obj[i];
  lines_image *img = (lines_image *)l->images.state + i;
  *imgp = img;
  if (!img->tried) {
    img->tried = 1;
    if (obj->file == NULL)
      return NULL;
    /* The bytes come from obj->file (/proc/self/exe for a main executable
     * deleted or replaced since it started); the name from its real path,
     * where a .gnu_debuglink file is looked for. */
    int fd = pprt__sys_open(obj->file, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
      return NULL;
    img->dwfl = dwfl_begin(&l->cb);
    if (img->dwfl == NULL) {
      close(fd);
      return NULL;
    }
    dwfl_report_begin(img->dwfl);
    /* add_p_vaddr: the module starts at bias + its first p_vaddr, which
     * keeps a prelinked library right too. fd is the module's from here. */
    img->mod = dwfl_report_elf(img->dwfl, obj->path, obj->path, fd, obj->bias, true);
    if (img->mod == NULL)
      close(fd);
    void **user = NULL;
    if (img->mod != NULL)
      dwfl_module_info(img->mod, &user, NULL, NULL, NULL, NULL, NULL, NULL);
    if (user != NULL)
      *user = l; /* for find_debuginfo */
    dwfl_report_end(img->dwfl, NULL, NULL);
  }
  return img->mod;
}

/* ---- lookup ------------------------------------------------------------------------ */

/* Deepest inline chain looked at (deeper chains lose their outermost
 * callers, as the profile builder's PPRT__MAX_FRAMES would). */
#define PPRT__OS_MAX_INLINE 64

/* The name a function is linked under (C++ mangled), else its source name,
 * following DW_AT_abstract_origin and DW_AT_specification. */
static const char *die_name(Dwarf_Die *die) {
  Dwarf_Attribute attr;
  const char *name = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
    name = dwarf_formstring(&attr);
  if (name == NULL && dwarf_attr_integrate(die, DW_AT_name, &attr))
    name = dwarf_formstring(&attr);
  return name;
}

static int die_udata(Dwarf_Die *die, unsigned at, Dwarf_Word *out) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, at, &attr) != NULL && dwarf_formudata(&attr, out) == 0;
}

/* path (malloc'd, consumed) as a string that stays until close: one copy
 * of each, however many frames name it. NULL stays NULL. */
static const char *intern(pprt__os_lines *l, char *path) {
  return pprt__lines_intern(&l->strings, path);
}

/* dir/name, malloc'd. */
static char *join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  char *p = malloc(dl + nl + 2);
  if (p != NULL) {
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl + 1);
  }
  return p;
}

/* The sections of img's debug information dbg, read once. */
static const pprt__dw_sections *sections_of(lines_image *img, Dwarf *dbg) {
  if (img->secs_of != dbg) {
    img->secs_of = dbg;
    pprt__dw_sections_get(dwarf_getelf(dbg), &img->secs);
  }
  return &img->secs;
}

/* The unit cu of img made the current one: its function index and line
 * program, the previous unit's freed. NULL on ENOMEM. */
static lines_unit *unit_for(pprt__os_lines *l, lines_image *img, Dwarf_Die *cu) {
  lines_unit *u = &l->unit;
  Dwarf *dbg = dwarf_cu_getdwarf(cu->cu);
  Dwarf_Off off = dwarf_dieoffset(cu);
  if (u->dbg == dbg && u->off == off)
    return u;
  unit_free(u);
  if (pprt__dw_index_build(cu, &u->ix) != 0)
    return NULL;
  u->dbg = dbg;
  u->off = off;
  Dwarf_Attribute attr;
  u->comp_dir = dwarf_attr(cu, DW_AT_comp_dir, &attr) ? dwarf_formstring(&attr) : NULL;
  Dwarf_Word stmt;
  uint8_t addr_size = 0;
  Dwarf_Die die;
  const pprt__dw_sections *secs = sections_of(img, dbg);
  if (secs->line != NULL && dwarf_attr(cu, DW_AT_stmt_list, &attr) != NULL &&
      dwarf_formudata(&attr, &stmt) == 0 && dwarf_diecu(cu, &die, &addr_size, NULL) != NULL &&
      pprt__dw_lineprog_open(&u->lp, secs, stmt, addr_size, u->comp_dir) == 0)
    u->has_lp = 1;
  return u;
}

/* The line of pc in unit u: from pprt's interpreter, else libdw's table. */
static const char *unit_line(pprt__os_lines *l, lines_unit *u, Dwarf_Die *cu, Dwarf_Addr pc,
                             int *line) {
  *line = 0;
  if (u->has_lp) {
    pprt__dw_row row;
    if (!pprt__dw_lineprog_find(&u->lp, pc, &row))
      return NULL;
    *line = (int)row.line;
    return intern(l, pprt__dw_lineprog_path(&u->lp, row.file));
  }
  Dwarf_Line *dl = dwarf_getsrc_die(cu, pc);
  const char *file = dl != NULL ? dwarf_linesrc(dl, NULL, NULL) : NULL;
  if (file != NULL && dwarf_lineno(dl, line) != 0)
    *line = 0;
  return file;
}

/* Entry idx of the unit's file table as a path a reader can open: DWARF 5
 * tables name files relative to the compilation directory, which the line
 * table's own answers already include. */
static const char *call_file(pprt__os_lines *l, lines_unit *u, Dwarf_Die *cu, Dwarf_Word idx) {
  char *name = NULL;
  if (u->has_lp) {
    name = pprt__dw_lineprog_path(&u->lp, idx);
  } else {
    Dwarf_Files *files;
    size_t nfiles;
    const char *f = NULL;
    if (dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && idx < nfiles)
      f = dwarf_filesrc(files, idx, NULL, NULL);
    name = f ? strdup(f) : NULL;
  }
  if (name != NULL && name[0] != '/' && u->comp_dir != NULL && u->comp_dir[0] == '/') {
    char *full = join(u->comp_dir, name);
    if (full != NULL) {
      free(name);
      name = full;
    }
  }
  return intern(l, name);
}

int pprt__os_lines_resolve(pprt__os_lines *l, uintptr_t addr, pprt__os_frame *out, size_t max) {
  lines_image *img = NULL;
  Dwfl_Module *mod = module_for(l, addr, &img);
  if (mod == NULL || max == 0)
    return 0;
  Dwarf_Addr bias;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
  if (cu == NULL)
    return 0;
  Dwarf *dbg = dwarf_cu_getdwarf(cu->cu);
  lines_unit *u = unit_for(l, img, cu);
  if (u == NULL)
    return 0;
  int line;
  const char *file = unit_line(l, u, cu, addr - bias, &line);
  Dwarf_Off offs[PPRT__OS_MAX_INLINE];
  size_t nscopes = pprt__dw_index_find(&u->ix, addr - bias, offs, PPRT__OS_MAX_INLINE);
  size_t n = 0;
  /* Innermost first: each inlined instance says where its caller called it
   * (DW_AT_call_file, DW_AT_call_line), which is the next frame's line. */
  for (size_t i = 0; i < nscopes && n < max; i++) {
    Dwarf_Die die;
    if (dwarf_offdie(dbg, offs[i], &die) == NULL)
      break;
    int tag = dwarf_tag(&die);
    const char *name = die_name(&die);
    int decl = 0;
    if (dwarf_decl_line(&die, &decl) != 0)
      decl = 0;
    out[n++] = (pprt__os_frame){name, file, line, decl};
    if (tag != DW_TAG_inlined_subroutine)
      break;
    Dwarf_Word cf = 0, cl = 0;
    file = NULL;
    line = 0;
    if (die_udata(&die, DW_AT_call_line, &cl))
      line = (int)cl;
    if (die_udata(&die, DW_AT_call_file, &cf))
      file = call_file(l, u, cu, cf);
  }
  if (n == 0) {
    /* A line table without a function around addr (assembly built with
     * -g): the line, for the caller to name from the symbol table (which
     * libdwfl would sort again for itself). */
    if (file == NULL)
      return 0;
    out[n++] = (pprt__os_frame){NULL, file, line, 0};
  }
  return (int)n;
}

void pprt__os_lines_order(pprt__os_lines *l, uint64_t *addrs, size_t n) {
  (void)l; /* address order: one unit at a time already */
  (void)addrs;
  (void)n;
}
