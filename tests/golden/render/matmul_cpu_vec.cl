kernel __attribute__((reqd_work_group_size(1, 1, 1))) void matmul_15de80d1e8(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  const int col = (int)get_global_id(0) * 16, row = (int)get_global_id(1) * 16, bat = (int)get_global_id(2);
  const int ao = 0, bo = 0;
  const global float* a0 = p1 + ao + min(row + 0, 63) * 64;
  float16 c0 = (float16)(0.0f);
  const global float* a1 = p1 + ao + min(row + 1, 63) * 64;
  float16 c1 = (float16)(0.0f);
  const global float* a2 = p1 + ao + min(row + 2, 63) * 64;
  float16 c2 = (float16)(0.0f);
  const global float* a3 = p1 + ao + min(row + 3, 63) * 64;
  float16 c3 = (float16)(0.0f);
  const global float* a4 = p1 + ao + min(row + 4, 63) * 64;
  float16 c4 = (float16)(0.0f);
  const global float* a5 = p1 + ao + min(row + 5, 63) * 64;
  float16 c5 = (float16)(0.0f);
  const global float* a6 = p1 + ao + min(row + 6, 63) * 64;
  float16 c6 = (float16)(0.0f);
  const global float* a7 = p1 + ao + min(row + 7, 63) * 64;
  float16 c7 = (float16)(0.0f);
  const global float* a8 = p1 + ao + min(row + 8, 63) * 64;
  float16 c8 = (float16)(0.0f);
  const global float* a9 = p1 + ao + min(row + 9, 63) * 64;
  float16 c9 = (float16)(0.0f);
  const global float* a10 = p1 + ao + min(row + 10, 63) * 64;
  float16 c10 = (float16)(0.0f);
  const global float* a11 = p1 + ao + min(row + 11, 63) * 64;
  float16 c11 = (float16)(0.0f);
  const global float* a12 = p1 + ao + min(row + 12, 63) * 64;
  float16 c12 = (float16)(0.0f);
  const global float* a13 = p1 + ao + min(row + 13, 63) * 64;
  float16 c13 = (float16)(0.0f);
  const global float* a14 = p1 + ao + min(row + 14, 63) * 64;
  float16 c14 = (float16)(0.0f);
  const global float* a15 = p1 + ao + min(row + 15, 63) * 64;
  float16 c15 = (float16)(0.0f);
  const global float* bp = p2 + bo + col;
  for (int kk = 0; kk < 64; ++kk) {
    const float16 bv = vload16(0, bp + kk * 64);
    c0 = fma((float16)(a0[kk]), bv, c0); c1 = fma((float16)(a1[kk]), bv, c1); c2 = fma((float16)(a2[kk]), bv, c2); c3 = fma((float16)(a3[kk]), bv, c3); c4 = fma((float16)(a4[kk]), bv, c4); c5 = fma((float16)(a5[kk]), bv, c5); c6 = fma((float16)(a6[kk]), bv, c6); c7 = fma((float16)(a7[kk]), bv, c7); c8 = fma((float16)(a8[kk]), bv, c8); c9 = fma((float16)(a9[kk]), bv, c9); c10 = fma((float16)(a10[kk]), bv, c10); c11 = fma((float16)(a11[kk]), bv, c11); c12 = fma((float16)(a12[kk]), bv, c12); c13 = fma((float16)(a13[kk]), bv, c13); c14 = fma((float16)(a14[kk]), bv, c14); c15 = fma((float16)(a15[kk]), bv, c15);
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
  if (row + 4 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 4) * 64 + col;
    vstore16(c4, 0, yr);
  }
  if (row + 5 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 5) * 64 + col;
    vstore16(c5, 0, yr);
  }
  if (row + 6 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 6) * 64 + col;
    vstore16(c6, 0, yr);
  }
  if (row + 7 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 7) * 64 + col;
    vstore16(c7, 0, yr);
  }
  if (row + 8 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 8) * 64 + col;
    vstore16(c8, 0, yr);
  }
  if (row + 9 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 9) * 64 + col;
    vstore16(c9, 0, yr);
  }
  if (row + 10 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 10) * 64 + col;
    vstore16(c10, 0, yr);
  }
  if (row + 11 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 11) * 64 + col;
    vstore16(c11, 0, yr);
  }
  if (row + 12 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 12) * 64 + col;
    vstore16(c12, 0, yr);
  }
  if (row + 13 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 13) * 64 + col;
    vstore16(c13, 0, yr);
  }
  if (row + 14 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 14) * 64 + col;
    vstore16(c14, 0, yr);
  }
  if (row + 15 < 64) {
    global float* yr = p0 + bat * 4096 + (row + 15) * 64 + col;
    vstore16(c15, 0, yr);
  }
}

