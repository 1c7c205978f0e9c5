// Allocation table (see table.h).
#include "vgpu/table.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "vgpu/spinlock.h"

namespace fracgpu::vgpu {
namespace {

SpinLock g_lock;
Entry* g_slots = nullptr;
uint64_t g_capacity = 0;  // power of two
uint64_t g_size = 0;

struct Guard : SpinGuard {
  Guard() : SpinGuard(g_lock) {}
};

uint64_t Hash(Kind kind, uint64_t key) {
  uint64_t h = key ^ (static_cast<uint64_t>(kind) << 56);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

Entry* Map(uint64_t capacity) {
  void* p = mmap(nullptr, capacity * sizeof(Entry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Entry*>(p);
}

int64_t FindSlot(Kind kind, uint64_t key) {
  if (!g_slots) return -1;
  uint64_t mask = g_capacity - 1;
  for (uint64_t i = Hash(kind, key) & mask;; i = (i + 1) & mask) {
    const Entry& e = g_slots[i];
    if (!e.occupied) return -1;
    if (e.key == key && e.kind == kind) return static_cast<int64_t>(i);
  }
}

void PlaceNoGrow(const Entry& entry) {
  uint64_t mask = g_capacity - 1;
  for (uint64_t i = Hash(entry.kind, entry.key) & mask;; i = (i + 1) & mask) {
    if (!g_slots[i].occupied) {
      g_slots[i] = entry;
      g_slots[i].occupied = 1;
      ++g_size;
      return;
    }
  }
}

bool Grow() {
  uint64_t cap = g_capacity ? g_capacity * 2 : 4096;
  Entry* fresh = Map(cap);
  if (!fresh) return false;
  Entry* old = g_slots;
  uint64_t old_cap = g_capacity;
  g_slots = fresh;
  g_capacity = cap;
  g_size = 0;
  for (uint64_t i = 0; i < old_cap; ++i)
    if (old[i].occupied) PlaceNoGrow(old[i]);
  if (old) munmap(old, old_cap * sizeof(Entry));
  return true;
}

// Backward-shift deletion keeps probe chains intact without tombstones.
void EraseAt(uint64_t i) {
  uint64_t mask = g_capacity - 1;
  uint64_t hole = i;
  for (uint64_t j = (i + 1) & mask; g_slots[j].occupied; j = (j + 1) & mask) {
    uint64_t home = Hash(g_slots[j].kind, g_slots[j].key) & mask;
    // Move j into the hole if its home is not in (hole, j] cyclically.
    bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!in_range) {
      g_slots[hole] = g_slots[j];
      hole = j;
    }
  }
  g_slots[hole] = Entry{};
  --g_size;
}

}  // namespace

bool TableInsert(const Entry& entry) noexcept {
  Guard g;
  int64_t at = FindSlot(entry.kind, entry.key);
  if (at >= 0) {
    g_slots[at] = entry;
    g_slots[at].occupied = 1;
    return true;
  }
  if ((g_size + 1) * 10 > g_capacity * 7 && !Grow()) return false;
  PlaceNoGrow(entry);
  return true;
}

bool TableRemove(Kind kind, uint64_t key, Entry* out) noexcept {
  Guard g;
  int64_t at = FindSlot(kind, key);
  if (at < 0) return false;
  if (out) *out = g_slots[at];
  EraseAt(static_cast<uint64_t>(at));
  return true;
}

bool TableFind(Kind kind, uint64_t key, Entry* out) noexcept {
  Guard g;
  int64_t at = FindSlot(kind, key);
  if (at < 0) return false;
  if (out) *out = g_slots[at];
  return true;
}

void TableSweep(bool (*fn)(const Entry&, void*), void* ctx) noexcept {
  Guard g;
  for (uint64_t i = 0; i < g_capacity;) {
    if (g_slots[i].occupied && fn(g_slots[i], ctx)) {
      EraseAt(i);  // an entry may shift into i: look at i again
    } else {
      ++i;
    }
  }
}

void TableResetAfterFork() noexcept {
  g_lock.ResetAfterFork();
  if (g_slots) std::memset(static_cast<void*>(g_slots), 0, g_capacity * sizeof(Entry));
  g_size = 0;
}

}  // namespace fracgpu::vgpu
