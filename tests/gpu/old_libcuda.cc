// A stand-in for a CUDA driver older than 12.8 (driver < 550): cuInit, and none of the
// checkpoint API (cuCheckpointProcess*), which gpu_park_check must refuse by name.
extern "C" int cuInit(unsigned int) noexcept { return 0; }
