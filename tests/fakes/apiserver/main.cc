// fake-apiserver: the in-process fake kube-apiserver as a standalone process, for manual
// runs and for other components' end-to-end scripts. Usage: fake-apiserver [port] [seed.json]
// where seed.json is {"nodes":[...], "pods":[...]}. Prints "listening on <url>" and serves
// until stdin closes.
#include <fstream>
#include <iostream>
#include <string>

#include "fake_apiserver.h"

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  fracgpu::fakes::FakeApiServer api(port);
  if (api.port() <= 0) {
    std::cerr << "fake-apiserver: cannot listen on port " << port << "\n";
    return 1;
  }
  if (argc > 2) {
    std::ifstream in(argv[2]);
    auto seed = nlohmann::json::parse(in, nullptr, false);
    if (!seed.is_object()) {
      std::cerr << "fake-apiserver: " << argv[2] << " is not a JSON object\n";
      return 1;
    }
    for (const char* r : {"nodes", "pods", "leases"}) {
      if (seed.contains(r) && seed[r].is_array()) {
        for (const auto& obj : seed[r]) api.Put(r, obj);
      }
    }
  }
  std::cout << "listening on " << api.url() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
