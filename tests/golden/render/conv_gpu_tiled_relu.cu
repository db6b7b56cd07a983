extern "C" __global__ void __launch_bounds__(256) conv_ep_df17442fa9(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const unsigned long long o2, const unsigned long long o3) {
  float* p0 = (float*)(mem + o0);
  const float* p1 = (const float*)(mem + o1);
  const float* p2 = (const float*)(mem + o2);
  const float* p3 = (const float*)(mem + o3);
  __shared__ float As[16][64];
  __shared__ float Bs[16][64];
  const int tx = (int)threadIdx.x, ty = (int)threadIdx.y, t = ty * 16 + tx;
  const int col0 = (int)blockIdx.x * 64, row0 = (int)blockIdx.y * 64;
  float acc[4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  const int z = (int)blockIdx.z, img = z / 1, grp = z % 1;
  const int xo = (img * 3 + grp * 3) * 1024;
  const int wo = grp * 432;
  for (int k0 = 0; k0 < 27; k0 += 16) {
    for (int l = 0; l < 4; ++l) {
      const int e = t + l * 256;
      const int am = e / 16, ak = e % 16;
      As[ak][am] = (row0 + am < 16 && k0 + ak < 27) ? p2[wo + (row0 + am) * 27 + k0 + ak] : 0.0f;
      const int bk = k0 + e / 64, bn = col0 + e % 64;
      const int ci = bk / 9, tap = bk % 9;
      const int iy = (bn / 32) * 1 - 1 + (tap / 3) * 1;
      const int ix = (bn % 32) * 1 - 1 + (tap % 3) * 1;
      const int ok = bk < 27 && bn < 1024 && iy >= 0 && iy < 32 && ix >= 0 && ix < 32;
      Bs[e / 64][e % 64] = ok ? p1[xo + ci * 1024 + iy * 32 + ix] : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + i * 16];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + j * 16];
      for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int row = row0 + ty + i * 16;
    if (row >= 16) break;
    const int co = grp * 16 + row;
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + tx + j * 16;
      if (col >= 1024) break;
      const int o = (img * 16 + co) * 1024 + col;
      const float c = acc[i][j] + p3[co];
      const float t0 = (c < 0 ? 0.0e+00f : c);
      p0[o] = t0;
    }
  }
}

