kernel __attribute__((reqd_work_group_size(6, 1, 1))) void reducemax_5a08fb3015(global unsigned char* mem, const ulong o0, const ulong o1, const int NUMEL) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  const int i = (int)get_global_id(0);
  if (i >= NUMEL) return;
  const int c0 = i / 3;
  const int c1 = (i) % 3;
  float acc = as_float((uint)(0xff800000u));
  for (int r0 = 0; r0 < 5; ++r0) {
    const float v = p1[c0 * 15 + c1 + r0 * 3];
    acc = (v > acc || v != v) ? v : acc;
  }
  p0[i] = acc;
}

