#pragma once
// Pins the glibc symbol versions libvgpu.so binds to, so the library loads on any glibc >= 2.17
// although it is built against a newer one (bookworm: 2.36). glibc 2.34 moved dl* and pthread*
// into libc.so.6 under a new default version GLIBC_2.34; the old versions are still exported
// (as compat symbols), and `.symver` makes the linker bind to them. On glibc < 2.34 the same
// versions are found in libdl.so.2 / libpthread.so.0, which libvgpu.so also lists as needed.
// Only compiled into libvgpu.so (FRACGPU_VGPU_SO); tests/vgpu/packaging_test.cc reads the ELF
// version needs and fails naming any symbol newer than 2.17.
#if defined(FRACGPU_VGPU_SO) && defined(__x86_64__)
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dladdr1,dladdr1@GLIBC_2.3.3");
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.12");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.12");
// The region lock's bounded wait (region.cc).
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
// The launch-stamp timer thread (hooks_launch.cc).
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_sigmask,pthread_sigmask@GLIBC_2.2.5");
__asm__(".symver pthread_attr_setstacksize,pthread_attr_setstacksize@GLIBC_2.2.5");
__asm__(".symver pthread_setname_np,pthread_setname_np@GLIBC_2.12");
#elif defined(FRACGPU_VGPU_SO) && defined(__aarch64__)
__asm__(".symver dlvsym,dlvsym@GLIBC_2.17");
__asm__(".symver dlopen,dlopen@GLIBC_2.17");
__asm__(".symver dlerror,dlerror@GLIBC_2.17");
__asm__(".symver dlclose,dlclose@GLIBC_2.17");
__asm__(".symver dladdr,dladdr@GLIBC_2.17");
__asm__(".symver dladdr1,dladdr1@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.17");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.17");
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.17");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.17");
__asm__(".symver pthread_create,pthread_create@GLIBC_2.17");
__asm__(".symver pthread_sigmask,pthread_sigmask@GLIBC_2.17");
__asm__(".symver pthread_attr_setstacksize,pthread_attr_setstacksize@GLIBC_2.17");
__asm__(".symver pthread_setname_np,pthread_setname_np@GLIBC_2.17");
#endif
