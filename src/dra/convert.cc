// The HAMi-to-DRA conversion moved to core/dra_convert.cc (pure, shared with the webhook's DRA
// mode); this unit stays in fracgpu_dra's source list and only checks the re-exporting header.
#include "dra/convert.h"
