kernel __attribute__((reqd_work_group_size(64, 1, 1))) void fused_7d91549c01(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2, const ulong o3, const int NUMEL) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  global const float* p3 = (global const float*)(mem + o3);
  const int i = (int)get_global_id(0);
  if (i >= NUMEL) return;
  const float a0 = p1[i];
  const float a1 = p2[i];
  const float t0 = a0 * a1;
  const float a2 = p3[(i / 16)];
  const float t1 = t0 + a2;
  const float t2 = (t1 < 0 ? 0.0e+00f : t1);
  p0[i] = t2;
}

