#include "workers/device_select.h"

#include <stdlib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::worker {
namespace {

using ::testing::HasSubstr;

TEST(DeviceSelectTest, EachBackendHasItsRuntimesVariable) {
  EXPECT_EQ(VisibilityVariable("cuda"), "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(VisibilityVariable("hip"), "HIP_VISIBLE_DEVICES");
  EXPECT_EQ(VisibilityVariable("level_zero"), "ZE_AFFINITY_MASK");
  EXPECT_EQ(VisibilityVariable("cpu"), "");
  EXPECT_EQ(VisibilityVariable("crashtest"), "");
}

TEST(DeviceSelectTest, UnsetVariableNamesTheDeviceItself) {
  for (const char* backend : {"cuda", "hip", "level_zero"}) {
    auto s = PlanDeviceSelection(backend, 3, std::nullopt);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->index, 3);
    EXPECT_EQ(s->variable, VisibilityVariable(backend));
    EXPECT_EQ(s->value, "3") << backend;
  }
  auto zero = PlanDeviceSelection("cuda", 0, std::nullopt);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->value, "0");
}

TEST(DeviceSelectTest, CudaCountsInPciOrderUnlessTheOperatorChoseAnOrder) {
  auto s = PlanDeviceSelection("cuda", 1, std::nullopt, std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cuda_device_order, "PCI_BUS_ID");
  s = PlanDeviceSelection("cuda", 1, std::nullopt, std::string("FASTEST_FIRST"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cuda_device_order, "");
  // A list already set was written in whatever order was in force: kept.
  s = PlanDeviceSelection("cuda", 1, std::string("4,5"), std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cuda_device_order, "");
  s = PlanDeviceSelection("hip", 1, std::nullopt, std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->cuda_device_order, "");
}

TEST(DeviceSelectTest, SetVariableIsIndexedAsAList) {
  auto s = PlanDeviceSelection("cuda", 1, std::string("2, 3"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->value, "3");
  s = PlanDeviceSelection("cuda", 0, std::string("GPU-8f1c2d3e-aaaa,MIG-1234"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value, "GPU-8f1c2d3e-aaaa");
  s = PlanDeviceSelection("level_zero", 1, std::string("0.0,0.1,1"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value, "0.1");
  s = PlanDeviceSelection("hip", 0, std::string("7"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value, "7");
}

TEST(DeviceSelectTest, PastTheEndOfASetListIsNotFound) {
  auto s = PlanDeviceSelection("cuda", 2, std::string("0,1"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("CUDA_VISIBLE_DEVICES='0,1': it lists 2 devices"));
  // Set but empty: the runtime sees no device at all.
  s = PlanDeviceSelection("hip", 0, std::string(""));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
}

TEST(DeviceSelectTest, CpuHasOneDeviceAndNoVariable) {
  auto s = PlanDeviceSelection("cpu", 0, std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->variable, "");
  EXPECT_EQ(s->value, "");
  EXPECT_EQ(PlanDeviceSelection("cpu", 1, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanDeviceSelection("cuda", -1, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceSelectTest, SelectDeviceSetsTheEnvironment) {
  unsetenv("HIP_VISIBLE_DEVICES");
  auto s = SelectDevice("hip", 2);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_NE(getenv("HIP_VISIBLE_DEVICES"), nullptr);
  EXPECT_STREQ(getenv("HIP_VISIBLE_DEVICES"), "2");
  setenv("ZE_AFFINITY_MASK", "3,5", 1);
  s = SelectDevice("level_zero", 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_STREQ(getenv("ZE_AFFINITY_MASK"), "5");
  unsetenv("HIP_VISIBLE_DEVICES");
  unsetenv("ZE_AFFINITY_MASK");
}

}  // namespace
}  // namespace yirage::worker
