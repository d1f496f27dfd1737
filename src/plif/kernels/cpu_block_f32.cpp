// The exported f32 entry points of the templates in cpu_block.h.
#include "cpu_block.h"

PLIF_BLOCK_ENTRY_POINTS(f32, float, float, float)
