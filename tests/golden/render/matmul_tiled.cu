extern "C" __global__ void __launch_bounds__(256) matmul_8f039714ae(unsigned char* mem, const unsigned long long o0, const unsigned long long o1, const unsigned long long o2) {
  float* p0 = (float*)(mem + o0);
  const float* p1 = (const float*)(mem + o1);
  const float* p2 = (const float*)(mem + o2);
  __shared__ float As[16][64];
  __shared__ float Bs[16][64];
  const int tx = (int)threadIdx.x, ty = (int)threadIdx.y, t = ty * 16 + tx;
  const int col0 = (int)blockIdx.x * 64, row0 = (int)blockIdx.y * 64;
  float acc[4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  const int bat = (int)blockIdx.z;
  const int ao = 0, bo = 0;
  for (int k0 = 0; k0 < 128; k0 += 16) {
    for (int l = 0; l < 4; ++l) {
      const int e = t + l * 256;
      const int am = e / 16, ak = e % 16;
      As[ak][am] = (row0 + am < 128 && k0 + ak < 128) ? p1[ao + (row0 + am) * 128 + k0 + ak] : 0.0f;
      const int bk = e / 64, bn = e % 64;
      Bs[bk][bn] = (k0 + bk < 128 && col0 + bn < 128) ? p2[bo + (k0 + bk) * 128 + col0 + bn] : 0.0f;
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
    if (row >= 128) break;
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + tx + j * 16;
      if (col >= 128) break;
      const int o = bat * 16384 + row * 128 + col;
      const float c = acc[i][j];
      p0[o] = c;
    }
  }
}

