kernel __attribute__((reqd_work_group_size(64, 1, 1))) void matmul_84152a3d58(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2, const int NUMEL) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  const int i = (int)get_global_id(0);
  if (i >= NUMEL) return;
  const int col = i % 8;
  const int row = (i / 8) % 8;
  const int bat = i / 64;
  const int ao = 0 + row * 8;
  const int bo = 0 + col;
  float acc = 0;
  for (int kk = 0; kk < 8; ++kk) {
    acc += p1[ao + kk] * p2[bo + kk * 8];
  }
  p0[i] = acc;
}

