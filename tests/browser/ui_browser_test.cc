// The web pages in real headless Chromium against `fracgpu ui`'s service and the fake API
// server (fixture: tests/ui/ui_fixture.h): the form's live preview shows the webhook's
// validation, the YAML and the fit; the dashboard shows the seeded cluster's bars. The
// rendered DOM is read with --dump-dom; screenshots are saved as test artifacts under
// FRACGPU_UI_ARTIFACT_DIR. Chromium runs with the flags Debian's headless mode needs in CI
// (no sandbox as root, no GPU, no network besides 127.0.0.1).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "ui_fixture.h"

#ifndef FRACGPU_UI_ARTIFACT_DIR
#define FRACGPU_UI_ARTIFACT_DIR "."
#endif
#ifndef FRACGPU_WEB_DIR
#define FRACGPU_WEB_DIR "web"
#endif
#ifndef FRACGPU_CHROMIUM
#define FRACGPU_CHROMIUM "chromium"
#endif

namespace fracgpu::ui {
namespace {

class BrowserTest : public uitest::UiApiTest {
 protected:
  UiOptions Options() const override {
    UiOptions o;
    o.web_dir = FRACGPU_WEB_DIR;
    return o;
  }

  // Runs chromium once on `page`: returns the rendered DOM (--dump-dom) and saves a screenshot
  // to the artifact folder as `screenshot` (one start per page: Chromium takes seconds to start).
  std::string Chromium(const std::string& page, const std::string& screenshot) {
    std::filesystem::create_directories(FRACGPU_UI_ARTIFACT_DIR);
    std::string file = std::string(FRACGPU_UI_ARTIFACT_DIR) + "/" + screenshot;
    std::filesystem::remove(file);
    std::string mode = "--dump-dom --screenshot=" + file;
    auto profile = std::filesystem::temp_directory_path() /
                   ("fracgpu-ui-chromium-" + std::to_string(::getpid()) + "-" + std::to_string(runs_++));
    std::string cmd = std::string(FRACGPU_CHROMIUM) +
                      " --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking"
                      " --disable-component-update --disable-sync --disable-dev-shm-usage --hide-scrollbars"
                      " --window-size=1440,1100 --virtual-time-budget=3000 --user-data-dir=" +
                      profile.string() + " " + mode + " '" + server_->BaseUrl() + "/" + page + "' 2>/dev/null";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      ::pclose(p);
    }
    std::error_code ec;
    std::filesystem::remove_all(profile, ec);
    return out;
  }

  int runs_ = 0;
};

TEST_F(BrowserTest, FormShowsPreviewFitAndYaml) {
  std::string dom = Chromium("index.html", "ui-form.png");
  ASSERT_NE(dom.find("New notebook"), std::string::npos) << dom.substr(0, 500);
  // Default form: 1 GPU, ½ → 50 % memory and cores; only GPU-a0 has 20480 MiB free.
  EXPECT_NE(dom.find("fits now on 1 GPU of 1 node"), std::string::npos) << dom;
  EXPECT_NE(dom.find("nvidia.com/gpumem-percentage: \"50\""), std::string::npos);
  EXPECT_NE(dom.find("node-b: does not fit"), std::string::npos);
  // Options from the cluster: the GPU types and UUIDs are offered.
  EXPECT_NE(dom.find("NVIDIA-Tesla T4"), std::string::npos);
  EXPECT_NE(dom.find("node-a #1 NVIDIA-A100-SXM4-40GB (GPU-a1)"), std::string::npos);
  // No identity header in a bare browser: the notebooks list is refused with the reason.
  EXPECT_NE(dom.find("no kubeflow-userid header"), std::string::npos);
  std::string png = std::string(FRACGPU_UI_ARTIFACT_DIR) + "/ui-form.png";
  EXPECT_GT(std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0, 10000u);
}

TEST_F(BrowserTest, DashboardShowsBarsOfTheSeededCluster) {
  std::string dom = Chromium("dashboard.html", "ui-dashboard.png");
  ASSERT_NE(dom.find("GPU dashboard"), std::string::npos);
  // GPU-a1: 30720 of 40960 MiB = 75 %; GPU-b0: 10000 of 15360 MiB = 65 %, cores 50 of 100.
  EXPECT_NE(dom.find("Memory: 30,720 / 40,960 MiB (75 %)"), std::string::npos) << dom;
  EXPECT_NE(dom.find("Memory: 10,000 / 15,360 MiB (65 %)"), std::string::npos);
  EXPECT_NE(dom.find("Cores: 50 / 100 % (50 %)"), std::string::npos);
  EXPECT_NE(dom.find("<td>train</td><td>team-b</td><td>30720</td>"), std::string::npos);
  EXPECT_NE(dom.find("node cordoned"), std::string::npos);
  EXPECT_NE(dom.find("no GPUs registered"), std::string::npos);
  EXPECT_NE(dom.find("3 node(s), 3 GPU(s) shown"), std::string::npos);
  std::string png = std::string(FRACGPU_UI_ARTIFACT_DIR) + "/ui-dashboard.png";
  EXPECT_GT(std::filesystem::exists(png) ? std::filesystem::file_size(png) : 0, 10000u);
}

}  // namespace
}  // namespace fracgpu::ui
