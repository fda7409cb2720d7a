/* ELF images and symbols, shared by the Linux and FreeBSD backends.
 *
 * elf_images.c takes a snapshot of the loaded objects (dl_iterate_phdr) that
 * both pprt__os_image_each and the symbolizer use; elf_symbols.c reads
 * symbol tables, from a mapped file or from an object's dynamic section in
 * memory, into a sorted table. The parsing functions are declared here, not
 * kept static, so tests can feed them truncated and corrupted files.
 */
#ifndef PPRT_PLATFORM_POSIX_ELF_H
#define PPRT_PLATFORM_POSIX_ELF_H

#include <stddef.h>
#include <stdint.h>

#include <elf.h>

/* The process's own ELF class: pprt reads only images it could have loaded. */
#if UINTPTR_MAX > 0xffffffffu
#define PPRT__ELF(type) Elf64_##type
#define PPRT__ELF_CLASS ELFCLASS64
#define PPRT__ELF_ST_TYPE(info) ELF64_ST_TYPE(info)
#define PPRT__ELF_ST_BIND(info) ELF64_ST_BIND(info)
#else
#define PPRT__ELF(type) Elf32_##type
#define PPRT__ELF_CLASS ELFCLASS32
#define PPRT__ELF_ST_TYPE(info) ELF32_ST_TYPE(info)
#define PPRT__ELF_ST_BIND(info) ELF32_ST_BIND(info)
#endif

typedef PPRT__ELF(Phdr) pprt__elf_phdr;

/* GNU build ids are 20 bytes (sha1) or 16 (md5, uuid); ld's
 * --build-id=0xHEX can make any length, and longer ones are dropped. */
#define PPRT__ELF_BUILD_ID_MAX 64

/* One loaded object, copied out of dl_iterate_phdr's report. */
typedef struct pprt__elf_object {
  char *path;           /* absolute path, or "[vdso]" */
  const char *file;     /* where to read the object's bytes: path, or
                           /proc/self/exe for a Linux main executable
                           (readable even after the file is deleted);
                           NULL for the vdso */
  uintptr_t bias;       /* dlpi_addr */
  pprt__elf_phdr *phdr; /* the program headers, copied */
  size_t phnum;
  uint8_t build_id[PPRT__ELF_BUILD_ID_MAX];
  size_t build_id_len;
  int is_main;
  int is_vdso;
} pprt__elf_object;

/* The loaded objects, the main executable first, and the loader's count of
 * objects ever added (dlpi_adds), which tells a symbolizer when to take a new
 * snapshot. Errors: -ENOMEM. */
typedef struct pprt__elf_snapshot {
  pprt__elf_object *obj;
  size_t n;
  unsigned long long adds;
} pprt__elf_snapshot;
int pprt__elf_snapshot_take(pprt__elf_snapshot *snap);

/* How many objects' paths snapshots have resolved on the file system (a
 * realpath, or the kernel's name of the executable); an object still loaded
 * since an earlier snapshot is not resolved again. For tests. */
unsigned long pprt__elf_path_resolutions(void);

struct dl_phdr_info;

/* dl_iterate_phdr under pprt's loader lock, which forks take first (see
 * elf_images.c): every pprt call into the loader goes through here. */
int pprt__elf_iterate_phdr(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
                           void *arg);
void pprt__elf_snapshot_free(pprt__elf_snapshot *snap);

/* A new snapshot after the loader added or removed objects, for a reader
 * that keeps state per object in an array parallel to the snapshot (*state,
 * elements of sz bytes): an object still loaded (same path and bias) keeps
 * its element; the elements of unloaded objects for which used() is true
 * move to the end of *retired (*nretired of them), where names handed out
 * from them stay valid until the reader closes. Errors: -ENOMEM, nothing
 * changed. */
int pprt__elf_snapshot_renew(pprt__elf_snapshot *snap, void **state, size_t sz, void **retired,
                             size_t *nretired, int (*used)(const void *elem));

/* Whether [addr, addr + len) lies in the file-backed part of a readable
 * PT_LOAD segment of obj: memory that stays mapped while obj is loaded. */
int pprt__elf_object_readable(const pprt__elf_object *obj, uintptr_t addr, size_t len);

/* The loader's dlpi_adds now, without copying anything: cheap enough to ask
 * on every address that falls in no known image. */
unsigned long long pprt__elf_loader_adds(void);

/* A function symbol at its runtime address. */
typedef struct pprt__elf_sym {
  uintptr_t addr;
  uintptr_t size;   /* 0 for a symbol without size (hand-written assembly) */
  uintptr_t maxend; /* the largest addr + size among this and the entries
                       before it, so a lookup knows when to stop looking back */
  const char *name;
  int rank; /* binding preference, for choosing among aliases */
} pprt__elf_sym;

/* Function symbols gathered from one or more tables, sorted and deduplicated
 * by pprt__elf_symtab_finish. Zero-initialise before use. */
typedef struct pprt__elf_symtab {
  pprt__elf_sym *sym;
  size_t n, cap;
} pprt__elf_symtab;

/* Adds the STT_FUNC and STT_GNU_IFUNC symbols of .symtab and .dynsym in the
 * ELF file held in data[0, size), at st_value + bias. When build_id_len is
 * nonzero and the file has an NT_GNU_BUILD_ID note, the two must match (a
 * file replaced on disk after it was loaded gives no symbols). Every offset
 * is checked against size: a truncated or corrupted file is refused or gives
 * only the symbols that lie wholly inside it. Names point into data.
 * Returns the number of symbols added; 0 means the file has no usable
 * symbol table. Errors: -ENOEXEC when data is not an ELF file of the
 * process's class and byte order or its build id differs; -ENOMEM. */
int pprt__elf_symtab_add_file(pprt__elf_symtab *tab, const void *data, size_t size, uintptr_t bias,
                              const uint8_t *build_id, size_t build_id_len);

/* Like pprt__elf_symtab_add_file, for a loaded object read in place through
 * its PT_DYNAMIC (DT_SYMTAB, DT_STRTAB, and DT_HASH or DT_GNU_HASH for the
 * count): how the vdso, which has no file, is read. Every table must lie in
 * a readable PT_LOAD segment of obj. Errors: -ENOEXEC, -ENOMEM. */
int pprt__elf_symtab_add_memory(pprt__elf_symtab *tab, const pprt__elf_object *obj);

/* Sorts by address and keeps one name per address (sized over unsized, then
 * global over weak over local, then fewer leading underscores, then the
 * shorter name). Errors:
 * none; an empty table stays empty. */
void pprt__elf_symtab_finish(pprt__elf_symtab *tab);

/* The symbol covering addr in a finished table: one whose [addr, addr + size)
 * holds it, else the nearest preceding unsized symbol if no sized one ends
 * after it and it is not below seg_start (the executable segment's first
 * address). Returns it, or NULL. */
const pprt__elf_sym *pprt__elf_symtab_lookup(const pprt__elf_symtab *tab, uintptr_t addr,
                                             uintptr_t seg_start);

void pprt__elf_symtab_free(pprt__elf_symtab *tab);

/* Finds the NT_GNU_BUILD_ID note among the notes in [notes, notes + len),
 * laid out with the given alignment (a PT_NOTE's p_align or a SHT_NOTE's
 * sh_addralign; 8 for .note.gnu.property, 4 for everything else). *id points
 * into the notes. Errors: -ENOENT when there is none (or the notes are
 * malformed before one is found). */
int pprt__elf_find_build_id(const void *notes, size_t len, size_t align, const uint8_t **id,
                            size_t *id_len);

/* Maps a regular file read-only. Errors: the open/fstat/mmap errno; -ENOEXEC
 * for something that is not a regular file or is empty (a FIFO would block,
 * a directory cannot be mapped). On error *data is NULL and *size 0. */
int pprt__elf_map_file(const char *path, const void **data, size_t *size);
void pprt__elf_unmap_file(const void *data, size_t size);

#endif /* PPRT_PLATFORM_POSIX_ELF_H */
