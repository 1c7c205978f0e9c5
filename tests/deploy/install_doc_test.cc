// docs/install.md: every command in its ```sh blocks is checked against what it refers to —
// kustomize folders and files exist, named objects and namespaces are in deploy/, the node label
// is the DaemonSet's selector, `fracgpu` command lines parse with the real flag definitions and
// agree with the Job's, host paths are the DaemonSet's hostPath volumes. Commands that act only
// outside fracgpu (nvidia-ctk, systemctl, openssl, docker push) are listed as such; anything else
// fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifest_check.h"

namespace fracgpu::deploytest {
namespace {

namespace fs = std::filesystem;
const std::string kSource = FRACGPU_SOURCE_DIR;

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> ShellLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  bool in_sh = false;
  for (std::string line; std::getline(in, line);) {
    std::string t = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (t.rfind("```", 0) == 0) {
      in_sh = !in_sh && t == "```sh";
      continue;
    }
    if (in_sh && !t.empty()) out.push_back(t);
  }
  return out;
}

class InstallDoc : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = LoadDeploy(kSource + "/deploy");
    ASSERT_TRUE(b.ok());
    b_ = *b;
    ds_ = FindObject(b_, "DaemonSet", "fracgpu-device-plugin");
    ASSERT_TRUE(ds_.IsDefined());
  }

  bool HasObject(const std::string& kind, const std::string& name, const std::string& ns) {
    for (const auto& o : ObjectsOfKind(b_, kind)) {
      if (o["metadata"]["name"].as<std::string>() == name &&
          (ns.empty() || o["metadata"]["namespace"].as<std::string>() == ns)) {
        return true;
      }
    }
    return false;
  }

  // Checks one command; returns "" or what is wrong.
  std::string CheckCommand(const std::vector<std::string>& w) {
    if (w.empty()) return "";
    std::vector<std::string> args = w;
    if (args[0] == "sudo") args.erase(args.begin());
    const std::string& cmd = args[0];
    if (cmd == "cd")
      return fs::is_directory(kSource + "/" + args[1]) || args[1] == ".." ? ""
                                                                          : "no folder " + args[1];
    if (cmd == "nvidia-ctk" || cmd == "systemctl" || cmd == "openssl") {
      ++external_;
      return "";
    }
    if (cmd == "docker") {
      if (args[1] == "push")
        return args[2] == built_tag_ ? "" : "pushes " + args[2] + ", not the tag built";
      for (size_t i = 1; i + 1 < args.size(); ++i) {
        if (args[i] == "-f" && !fs::exists(kSource + "/" + args[i + 1]))
          return "no Dockerfile " + args[i + 1];
        if (args[i] == "-t") built_tag_ = args[i + 1];
      }
      return args.back() == "." ? ""
                                : "docker build must run from the repository root with context .";
    }
    if (cmd == "kustomize") {
      // kustomize edit set image fracgpu=<ref> (run inside deploy/)
      std::string ref = args.back();
      std::string name = ref.substr(0, ref.find('='));
      bool mapped = false;
      for (const auto& i : b_.kustomization["images"])
        mapped |= i["name"].as<std::string>() == name;
      return mapped ? "" : "image " + name + " is not an image of kustomization.yaml";
    }
    if (cmd == "rm") {
      std::set<std::string> host_paths;
      for (const auto& v : ds_["spec"]["template"]["spec"]["volumes"]) {
        if (v["hostPath"]) host_paths.insert(v["hostPath"]["path"].as<std::string>());
      }
      for (size_t i = 2; i < args.size(); ++i) {
        bool ours = host_paths.count(args[i]) || host_paths.count(args[i] + "/node");
        if (!ours) return args[i] + " is not a host directory fracgpu writes";
      }
      return "";
    }
    if (cmd == "make") {
      // A target of the repository's Makefile (e.g. `make image`).
      std::ifstream mk(kSource + "/Makefile");
      std::string text((std::istreambuf_iterator<char>(mk)), std::istreambuf_iterator<char>());
      return args.size() == 2 && text.find("\n" + args[1] + ":") != std::string::npos
                 ? ""
                 : "no Makefile target " + args.back();
    }
    if (cmd == "fracgpu" && args.size() >= 2 && args[1] == "kube-scheduler-manifest") {
      // Its behaviour per Kubernetes version is tested in tests/cli.
      return args.size() == 4 && args[2] == "--server-version"
                 ? ""
                 : "kube-scheduler-manifest takes --server-version <v>";
    }
    if (cmd == "fracgpu") {
      auto parsed = ParseFracgpuArgs(std::vector<std::string>(args.begin() + 1, args.end()));
      if (!parsed.ok()) return parsed.status().message();
      YAML::Node job = FindObject(b_, "Job", "fracgpu-certs");
      std::vector<std::string> job_args;
      for (const auto& a : job["spec"]["template"]["spec"]["containers"][0]["args"])
        job_args.push_back(a.as<std::string>());
      auto job_parsed = ParseFracgpuArgs(job_args);
      for (const auto& [flag, value] : parsed->values) {
        if (flag != "--kubeconfig" && job_parsed->Get(flag) != value)
          return flag + " differs from the Job's";
      }
      ++fracgpu_;
      return "";
    }
    if (cmd == "helm") return CheckHelm(args);
    if (cmd != "kubectl") return "unchecked command " + cmd;
    std::string ns;
    for (size_t i = 1; i + 1 < args.size(); ++i) {
      if (args[i] == "-n") ns = args[i + 1];
    }
    if (!ns.empty() && !HasObject("Namespace", ns, ""))
      return "namespace " + ns + " is not created by deploy/";
    for (size_t i = 1; i + 1 < args.size(); ++i) {
      if (args[i] == "-k" && !fs::exists(kSource + "/" + args[i + 1] + "/kustomization.yaml"))
        return "no kustomization in " + args[i + 1];
      if (args[i] == "-f" && args[i + 1] != "-" && !fs::exists(kSource + "/" + args[i + 1]))
        return "no file " + args[i + 1];
    }
    static const std::map<std::string, std::string> kKinds = {{"job", "Job"},
                                                              {"deployment", "Deployment"},
                                                              {"daemonset", "DaemonSet"},
                                                              {"svc", "Service"}};
    for (const auto& a : args) {
      auto slash = a.find('/');
      if (slash == std::string::npos || a.find("--") == 0) continue;
      auto kind = kKinds.find(a.substr(0, slash));
      if (kind != kKinds.end() && !HasObject(kind->second, a.substr(slash + 1), ns))
        return a + " is not in deploy/ (namespace " + ns + ")";
    }
    if (args[1] == "label") {
      const YAML::Node sel = ds_["spec"]["template"]["spec"]["nodeSelector"];
      std::string l = args.back();
      if (l.back() == '-')
        return sel[l.substr(0, l.size() - 1)] ? ""
                                              : "removes a label the DaemonSet does not select on";
      auto eq = l.find('=');
      return sel[l.substr(0, eq)] && sel[l.substr(0, eq)].as<std::string>() == l.substr(eq + 1)
                 ? ""
                 : "label " + l + " is not the DaemonSet's nodeSelector";
    }
    if (args[1] == "get" && Has(args, "--raw")) {
      ++kubectl_;
      return args.back() == "/version" ? "" : "only `kubectl get --raw /version` is used";
    }
    if (args[1] == "get" || args[1] == "logs" || args[1] == "describe") {
      YAML::Node pod = YAML::LoadFile(kSource + "/deploy/examples/gpu-pod.yaml");
      std::string name = pod["metadata"]["name"].as<std::string>();
      if (!Has(args, name)) return "names a pod other than the sample's " + name;
    }
    ++kubectl_;
    return "";
  }
  // helm install|upgrade|template RELEASE CHART [-n NS] [--set K=V]... [-f FILE]: the chart is a
  // folder of the repository and every --set key a value its values.yaml defines (a misspelt
  // HAMi name would otherwise be ignored by helm without a word); helm uninstall|status RELEASE.
  std::string CheckHelm(const std::vector<std::string>& args) {
    if (args.size() < 3) return "helm needs a subcommand and a release";
    if (args[1] == "uninstall" || args[1] == "status") {
      ++helm_;
      return "";
    }
    if (args[1] != "install" && args[1] != "upgrade" && args[1] != "template")
      return "unchecked helm subcommand " + args[1];
    if (args.size() < 4 || !fs::exists(kSource + "/" + args[3] + "/Chart.yaml"))
      return "no chart " + (args.size() < 4 ? std::string("given") : args[3]);
    const YAML::Node values = YAML::LoadFile(kSource + "/" + args[3] + "/values.yaml");
    for (size_t i = 4; i + 1 < args.size(); ++i) {
      if (args[i] == "-f" && !fs::exists(kSource + "/" + args[i + 1]))
        return "no file " + args[i + 1];
      if (args[i] != "--set" && args[i] != "--set-string") continue;
      const std::string key = args[i + 1].substr(0, args[i + 1].find('='));
      if (!HasValue(values, key)) return "--set " + key + " is not a value of the chart";
    }
    ++helm_;
    return "";
  }
  static bool HasValue(const YAML::Node& node, const std::string& key) {
    const auto dot = key.find('.');
    const std::string head = key.substr(0, dot);
    if (!node.IsMap() || !node[head]) return false;
    return dot == std::string::npos || HasValue(node[head], key.substr(dot + 1));
  }
  static bool Has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }

  Bundle b_;
  YAML::Node ds_;
  std::string built_tag_;
  int external_ = 0, fracgpu_ = 0, kubectl_ = 0, helm_ = 0;
};

TEST_F(InstallDoc, EveryCommandRefersToWhatExists) {
  auto lines = ShellLines(kSource + "/docs/install.md");
  ASSERT_GE(lines.size(), 15u);
  for (const auto& line : lines) {
    std::string rest = line;
    size_t pos;
    while (true) {
      // Commands joined by && or a pipe are checked one by one.
      pos = std::min(rest.find("&&"), rest.find('|'));
      std::string part = rest.substr(0, pos);
      std::string problem = CheckCommand(Words(part));
      EXPECT_TRUE(problem.empty()) << "docs/install.md: `" << line << "`: " << problem;
      if (pos == std::string::npos) break;
      rest = rest.substr(pos + (rest.compare(pos, 2, "&&") == 0 ? 2 : 1));
    }
  }
  EXPECT_EQ(fracgpu_, 1);   // the manual `fracgpu certs`
  EXPECT_EQ(external_, 8);  // nvidia-ctk, systemctl, 6 openssl ("Authentication")
  EXPECT_GE(kubectl_, 14);
  EXPECT_GE(helm_, 3);  // "Install with Helm": install, status, upgrade
  // "Authentication" makes every Secret deploy/ mounts that nothing in deploy/ produces.
  std::ifstream doc(kSource + "/docs/install.md");
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  for (const char* secret :
       {"fracgpu-client-ca", "fracgpu-kube-scheduler-client", "fracgpu-ui-gateway"}) {
    EXPECT_TRUE(text.find(std::string("create secret generic ") + secret) != std::string::npos ||
                text.find(std::string("create secret tls ") + secret) != std::string::npos)
        << secret;
  }
}

TEST_F(InstallDoc, CheckerCatchesAWrongCommand) {
  EXPECT_NE(CheckCommand(Words("kubectl apply -k deploy/typo/")), "");
  EXPECT_NE(
      CheckCommand(Words("kubectl -n fracgpu-system rollout status deployment/fracgpu-schedular")),
      "");
  EXPECT_NE(CheckCommand(Words("kubectl label node n1 nvidia=yes")), "");
  EXPECT_NE(CheckCommand(Words("fracgpu certs --namespace=other")), "");
  EXPECT_NE(CheckCommand(Words("fracgpu certs --no-such-flag")), "");
  EXPECT_NE(CheckCommand(Words("sudo rm -rf /var/lib/kubelet")), "");
  EXPECT_NE(CheckCommand(Words("helm install fracgpu")), "");
  EXPECT_NE(CheckCommand(
                Words("helm install fracgpu deploy/helm/fracgpu --set devicePlugin.splitCount=4")),
            "");
  EXPECT_NE(CheckCommand(Words("helm install fracgpu hami-charts/hami")), "");
  EXPECT_EQ(CheckCommand(Words(
                "helm install fracgpu deploy/helm/fracgpu --set devicePlugin.deviceSplitCount=4")),
            "");
}

}  // namespace
}  // namespace fracgpu::deploytest
