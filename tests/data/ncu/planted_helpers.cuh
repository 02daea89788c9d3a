// Device helpers for planted.cu: the scatter's strided store lives here, so a finding in a
// header maps to the header's own line (and to the #include line in the user's file).
#pragma once

__device__ inline void store_column(float* out, int row, int col, int rows, float value) {
  out[(size_t)col * rows + row] = value;  // PLANT uncoalesced (header)
}
