#pragma once
// The per-process record of what libvgpu.so charged: device pointers, pool pointers, VMM
// handles and mappings, arrays and contexts, each with its device and size. An open-addressing
// hash table (linear probing, backward-shift deletion) in mmap'd memory behind a spinlock:
// hand-written because it sits on the allocation hot path (no malloc, which may itself be
// interposed, and no std::mutex), and must be resettable in a forked child.
#include <cstdint>

namespace fracgpu::vgpu {

/// What a table key is.
enum class Kind : uint8_t {
  kAlloc = 1,  ///< cuMemAlloc/Pitch/Managed pointer; size charged
  kPoolPtr,    ///< stream-ordered pointer; aux = pool (charges are per pool)
  kVmmHandle,  ///< cuMemCreate handle; size charged; aux = mappings; aux2 = released bit (1) +
               ///< 2 x extra handle references (retains, same-process imports)
  kVmmMap,     ///< cuMemMap VA; size mapped; aux = handle
  kArray,      ///< CUarray / CUmipmappedArray; size charged
  kContext,    ///< created context; size charged
  kModule,     ///< CUmodule or CUlibrary handle; size charged (module_bytes); aux = 1 library
  kVmmImport,  ///< handle imported from this process's own export; aux = origin kVmmHandle;
               ///< aux2 = its handle references (1 + retains); nothing charged of its own
  kVmmExport,  ///< a POSIX fd export: key = file identity (st_dev, st_ino); aux = origin
               ///< handle; size and dev = the origin's (to charge an import that outlives it)
  kCtxLimit,   ///< cuCtxSetLimit growth; key = context ^ limit; size charged (context_bytes)
  kExtMem,     ///< cuImportExternalMemory object; size charged; aux = buffers and mipmapped
               ///< arrays mapped from it and not yet freed; aux2 = destroyed
  kMcBind,     ///< a multicast binding; key = (object, device, mcOffset) mixed; aux = the bound
               ///< kVmmHandle (one reference); size = the multicast object (not bytes)
  kArrayMap,   ///< a sparse array tile mapped by cuMemMapArrayAsync; key = (array, subresource)
               ///< mixed; aux = the mapped kVmmHandle (one reference); size = the array
};
/// Entry::aux2 of a kAlloc / kArray entry that is a buffer / mipmapped array mapped from an
/// external memory object (size 0; aux = the object): its free is one mapping of it less.
inline constexpr uint32_t kExtMapped = 0xE7;

/// One record.
struct Entry {
  uint64_t key = 0;
  uint64_t size = 0;  ///< bytes
  uint64_t aux = 0;
  uint32_t aux2 = 0;
  Kind kind = Kind::kAlloc;
  int8_t dev = -1;  ///< region device index
  uint8_t occupied = 0;
};

/// Inserts or replaces the entry (kind, key). Returns false only if memory for growth could
/// not be mapped (the caller then undoes its charge). Takes the table spinlock.
bool TableInsert(const Entry& entry) noexcept;
/// Removes (kind, key) into *out. Returns false if absent.
bool TableRemove(Kind kind, uint64_t key, Entry* out) noexcept;
/// Copies (kind, key) into *out. Returns false if absent.
bool TableFind(Kind kind, uint64_t key, Entry* out) noexcept;
/// Calls fn(entry, ctx) for each entry; if fn returns true the entry is removed. Takes the
/// lock for the whole walk; fn must not call table functions.
void TableSweep(bool (*fn)(const Entry&, void*), void* ctx) noexcept;
/// Forgets everything and resets the lock (forked child).
void TableResetAfterFork() noexcept;

}  // namespace fracgpu::vgpu
