// The exported bf16 entry points of the templates in cpu_block.h.
#include "cpu_block.h"

PLIF_BLOCK_ENTRY_POINTS(bf16, uint16_t, bf16, float)
