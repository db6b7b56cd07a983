kernel __attribute__((reqd_work_group_size(64, 1, 1))) void transpose_06dc261674(global unsigned char* mem, const ulong o0, const ulong o1, const int NUMEL) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  const int i = (int)get_global_id(0);
  if (i >= NUMEL) return;
  const int c0 = i / 60;
  const int c1 = (i / 15) % 4;
  const int c2 = (i / 3) % 5;
  const int c3 = (i) % 3;
  p0[i] = p1[c0 * 60 + c1 * 5 + c2 + c3 * 20];
}

