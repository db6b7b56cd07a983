kernel __attribute__((reqd_work_group_size(1, 1, 1))) void matmul_095eba5dcb(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  const int col = (int)get_global_id(0) * 16, row = (int)get_global_id(1) * 4, bat = (int)get_global_id(2);
  const int ao = 0, bo = 0;
  const global float* a0 = p1 + ao + min(row + 0, 63) * 64;
  float16 c0 = (float16)(0.0f);
  const global float* a1 = p1 + ao + min(row + 1, 63) * 64;
  float16 c1 = (float16)(0.0f);
  const global float* a2 = p1 + ao + min(row + 2, 63) * 64;
  float16 c2 = (float16)(0.0f);
  const global float* a3 = p1 + ao + min(row + 3, 63) * 64;
  float16 c3 = (float16)(0.0f);
  const global float* bp = p2 + bo + col;
  for (int kk = 0; kk < 64; ++kk) {
    const float16 bv = vload16(0, bp + kk * 64);
    c0 = fma((float16)(a0[kk]), bv, c0); c1 = fma((float16)(a1[kk]), bv, c1); c2 = fma((float16)(a2[kk]), bv, c2); c3 = fma((float16)(a3[kk]), bv, c3);
  }
  if (row + 0 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 0) * 64 + col;
    vstore16(c0, 0, yr);
  }
  if (row + 1 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 1) * 64 + col;
    vstore16(c1, 0, yr);
  }
  if (row + 2 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 2) * 64 + col;
    vstore16(c2, 0, yr);
  }
  if (row + 3 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 3) * 64 + col;
    vstore16(c3, 0, yr);
  }
}

