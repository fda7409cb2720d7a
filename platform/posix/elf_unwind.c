/* Call frame information of loaded ELF images (Linux and FreeBSD):
 * pprt__os_unwind_each and pprt__os_loader_generation.
 *
 * Divisions: the loader's generation; per loaded object, its code range and
 * machine from the program headers, .eh_frame_hdr from PT_GNU_EH_FRAME with
 * the segment that holds .eh_frame, or, for an object built without
 * .eh_frame, .debug_frame read from its file. */
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "core/platform.h"
#include "platform/posix/elf.h"

typedef PPRT__ELF(Ehdr) elf_ehdr;
typedef PPRT__ELF(Shdr) elf_shdr;

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#else
#define HOST_MACHINE 0
#endif

/* ---- the loader's generation ---------------------------------------------------- */

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg) {
  uint64_t *gen = arg;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
    *gen = (uint64_t)info->dlpi_adds + ((uint64_t)info->dlpi_subs << 32);
  return 1; /* the counters are the same in every object's report */
}

uint64_t pprt__os_loader_generation(void) {
  uint64_t gen = 0;
  pprt__elf_iterate_phdr(read_counts, &gen);
  return gen;
}

/* ---- .debug_frame from the file --------------------------------------------------- */

/* The .debug_frame section of the mapped file, or 0 (compressed sections,
 * which need zlib here, are left to frame pointers). */
static int find_debug_frame(const uint8_t *base, size_t size, const uint8_t **sec, size_t *len) {
  elf_ehdr eh;
  if (size < sizeof eh)
    return 0;
  memcpy(&eh, base, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != PPRT__ELF_CLASS ||
      eh.e_shoff == 0 || eh.e_shentsize != sizeof(elf_shdr) || eh.e_shoff > size ||
      eh.e_shnum > (size - eh.e_shoff) / sizeof(elf_shdr) || eh.e_shstrndx >= eh.e_shnum)
    return 0;
  elf_shdr str;
  memcpy(&str, base + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof str, sizeof str);
  if (str.sh_offset > size || str.sh_size > size - str.sh_offset)
    return 0;
  for (size_t i = 0; i < eh.e_shnum; i++) {
    elf_shdr sh;
    memcpy(&sh, base + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_name >= str.sh_size || sh.sh_type != SHT_PROGBITS || (sh.sh_flags & SHF_COMPRESSED) ||
        sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)
      continue;
    const char *name = (const char *)base + str.sh_offset + sh.sh_name;
    size_t room = (size_t)(str.sh_size - sh.sh_name);
    if (room >= sizeof ".debug_frame" && memcmp(name, ".debug_frame", sizeof ".debug_frame") == 0) {
      *sec = base + sh.sh_offset;
      *len = (size_t)sh.sh_size;
      return 1;
    }
  }
  return 0;
}

/* ---- per object ------------------------------------------------------------------- */

static int object_unwind(const pprt__elf_object *obj,
                         int (*fn)(const pprt__os_unwind_source *src, void *ctx), void *ctx) {
  pprt__os_unwind_source src = {.path = obj->path, .load_bias = obj->bias, .machine = HOST_MACHINE};
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const pprt__elf_phdr *eh_frame = NULL;
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    uintptr_t at = obj->bias + (uintptr_t)ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz > 0) {
      if (at < lo)
        lo = at;
      if (at + ph->p_memsz > hi)
        hi = at + (uintptr_t)ph->p_memsz;
    } else if (ph->p_type == PT_GNU_EH_FRAME && ph->p_memsz > 0) {
      eh_frame = ph;
    }
  }
  if (hi == 0)
    return 0; /* no code */
  /* The machine from the ELF header, mapped with the first segment. */
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    uintptr_t at = obj->bias + (uintptr_t)ph->p_vaddr;
    elf_ehdr eh;
    if (ph->p_type == PT_LOAD && ph->p_offset == 0 &&
        pprt__elf_object_readable(obj, at, sizeof eh)) {
      memcpy(&eh, (const void *)at, sizeof eh);
      if (memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0)
        src.machine = eh.e_machine;
    }
  }
  src.start = lo;
  src.limit = hi;
  const void *file = NULL;
  size_t file_size = 0;
  if (eh_frame != NULL) {
    uintptr_t at = obj->bias + (uintptr_t)eh_frame->p_vaddr;
    for (size_t i = 0; i < obj->phnum; i++) {
      const pprt__elf_phdr *ph = &obj->phdr[i];
      uintptr_t seg = obj->bias + (uintptr_t)ph->p_vaddr;
      if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || at < seg || at - seg >= ph->p_filesz ||
          eh_frame->p_memsz > ph->p_filesz - (at - seg))
        continue;
      src.hdr = (const uint8_t *)at;
      src.hdr_len = (size_t)eh_frame->p_memsz;
      src.frame = (const uint8_t *)seg;
      src.frame_len = (size_t)ph->p_filesz;
      src.frame_addr = seg;
      break;
    }
  } else if (obj->file != NULL && pprt__elf_map_file(obj->file, &file, &file_size) == 0) {
    const uint8_t *sec;
    size_t len;
    if (find_debug_frame(file, file_size, &sec, &len)) {
      src.frame = sec;
      src.frame_len = len;
      src.frame_addr = 0;
      src.debug_frame = 1;
      src.eh_bytes = len;
    }
  }
  int rc = fn(&src, ctx);
  if (file != NULL)
    pprt__elf_unmap_file(file, file_size);
  return rc;
}

int pprt__os_unwind_each(int (*fn)(const pprt__os_unwind_source *src, void *ctx), void *ctx) {
  pprt__elf_snapshot snap;
  int rc = pprt__elf_snapshot_take(&snap);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < snap.n && rc == 0; i++)
    rc = object_unwind(&snap.obj[i], fn, ctx);
  pprt__elf_snapshot_free(&snap);
  return rc;
}
