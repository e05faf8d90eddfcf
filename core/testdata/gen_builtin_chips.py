# Generates core/builtin_chips.cc (the built-in catalog) from the tables below:
#   python3 core/testdata/gen_builtin_chips.py
import json
chips=[]
def chip(cid,name,vendor,cat,arch,code,backend,mem,comp,feat,source,match=None,extra_meta=None,logical=None):
    md={"source":source}
    if match: md["match"]=match
    if logical: md["logical_devices"]=str(logical)
    if extra_meta: md.update(extra_meta)
    c={"chip_id":cid,"chip_name":name,"vendor":vendor,"category":cat,"arch_name":arch,"arch_code":code,
       "backend":backend,"memory":mem,"compute":{k:v for k,v in comp.items() if v},"features":{k:v for k,v in feat.items() if v},"metadata":md}
    chips.append(c)
def mem(cap,bw,typ,bus,ecc=True): 
    d={"capacity_gb":cap,"bandwidth_gbps":bw,"memory_type":typ,"ecc":ecc}
    if bus: d["bus_width_bits"]=bus
    return d
NV_SM={70:(2048,32,96,96),75:(1024,16,64,64),80:(2048,32,163,164),86:(1536,16,99,100),89:(1536,24,99,100),90:(2048,32,227,228),100:(2048,32,227,228)}
def nv(sm,sms,clock,l2,fp32,fp16=0,bf16=0,fp8=0,int8=0):
    t,b,sb,sc=NV_SM[sm]
    return {"warp_size":32,"num_compute_units":sms,"clock_mhz":clock,"max_threads_per_block":1024,"max_threads_per_cu":t,"max_blocks_per_cu":b,
            "shared_mem_per_block_kb":sb,"shared_mem_per_cu_kb":sc,"l2_cache_mb":l2,"registers_per_block":65536,
            "peak_tflops_fp32":fp32,"peak_tflops_fp16":fp16,"peak_tflops_bf16":bf16,"peak_tflops_fp8":fp8,"peak_tflops_int8":int8}
def nvfeat(sm,nvlink=False,mig=False):
    gen={70:1,75:2,80:3,86:3,89:4,90:4,100:5}[sm]
    return {"tensor_cores":True,"tensor_core_gen":gen,"tma":sm>=90,"fp8":sm>=89,"fp4":sm>=100,"bf16":sm>=80,"fp16":True,"int8":True,
            "sparsity":sm>=80,"nvlink":nvlink,"multi_instance":mig}
CG="; CUDA C++ Programming Guide (per-SM limits of compute capability %s)"
# ---- NVIDIA ----
chip("v100_sxm2_32gb","NVIDIA Tesla V100 SXM2 32GB","nvidia","gpu","Volta","sm_70","cuda",mem(32,900,"HBM2",4096),nv(70,80,1530,6,15.7,125,0,0,0),nvfeat(70,True),
     "NVIDIA Tesla V100 datasheet"+CG%"7.0",match="v100 sxm2 32gb|v100 sxm2|v100")
chip("t4","NVIDIA T4","nvidia","gpu","Turing","sm_75","cuda",mem(16,320,"GDDR6",256),nv(75,40,1590,4,8.1,65,0,0,130),nvfeat(75),
     "NVIDIA T4 datasheet"+CG%"7.5",match="t4")
for cid,name,m,memtype,bw,match in [("a100_sxm4_40gb","NVIDIA A100 SXM4 40GB",40,"HBM2",1555,"a100 sxm4 40gb|a100"),
                                ("a100_sxm4_80gb","NVIDIA A100 SXM4 80GB",80,"HBM2e",2039,"a100 sxm4 80gb|a100"),
                                ("a100_pcie_40gb","NVIDIA A100 PCIe 40GB",40,"HBM2",1555,"a100 pcie 40gb|a100 pcie"),
                                ("a100_pcie_80gb","NVIDIA A100 PCIe 80GB",80,"HBM2e",1935,"a100 80gb pcie|a100 pcie 80gb|a100 pcie")]:
    chip(cid,name,"nvidia","gpu","Ampere","sm_80","cuda",mem(m,bw,memtype,5120),nv(80,108,1410,40,19.5,312,312,0,624),nvfeat(80,True,True),
         "NVIDIA A100 Tensor Core GPU datasheet"+CG%"8.0",match=match)
chip("a30","NVIDIA A30","nvidia","gpu","Ampere","sm_80","cuda",mem(24,933,"HBM2",3072),nv(80,56,1440,24,10.3,165,165,0,330),nvfeat(80,True,True),
     "NVIDIA A30 Tensor Core GPU datasheet"+CG%"8.0",match="a30")
chip("a10","NVIDIA A10","nvidia","gpu","Ampere","sm_86","cuda",mem(24,600,"GDDR6",384),nv(86,72,1695,6,31.2,125,125,0,250),nvfeat(86),
     "NVIDIA A10 Tensor Core GPU datasheet"+CG%"8.6",match="a10")
chip("l4","NVIDIA L4","nvidia","gpu","Ada Lovelace","sm_89","cuda",mem(24,300,"GDDR6",192),nv(89,58,2040,48,30.3,121,121,242,242),nvfeat(89),
     "NVIDIA L4 Tensor Core GPU datasheet (dense = half the sparse figures)"+CG%"8.9",match="l4")
chip("l40s","NVIDIA L40S","nvidia","gpu","Ada Lovelace","sm_89","cuda",mem(48,864,"GDDR6",384),nv(89,142,2520,96,91.6,362,362,733,733),nvfeat(89),
     "NVIDIA L40S datasheet (dense = half the sparse figures)"+CG%"8.9",match="l40s")
chip("rtx_3090","NVIDIA GeForce RTX 3090","nvidia","gpu","Ampere","sm_86","cuda",mem(24,936,"GDDR6X",384,False),nv(86,82,1695,6,35.6,71,71,0,284),nvfeat(86,True),
     "NVIDIA Ampere GA102 GPU architecture whitepaper (tensor FP16/BF16 with FP32 accumulate, dense)"+CG%"8.6",match="rtx 3090")
chip("rtx_4090","NVIDIA GeForce RTX 4090","nvidia","gpu","Ada Lovelace","sm_89","cuda",mem(24,1008,"GDDR6X",384,False),nv(89,128,2520,72,82.6,165.2,165.2,330.3,660.6),nvfeat(89),
     "NVIDIA Ada Lovelace GPU architecture whitepaper (FP32 accumulate, dense)"+CG%"8.9",match="rtx 4090")
chip("h100_sxm","NVIDIA H100 SXM5 80GB","nvidia","gpu","Hopper","sm_90","cuda",mem(80,3350,"HBM3",5120),nv(90,132,1980,50,67,989.5,989.5,1979,1979),nvfeat(90,True,True),
     "NVIDIA H100 Tensor Core GPU datasheet (dense = half the sparse figures)"+CG%"9.0",match="h100 sxm|h100 80gb hbm3|h100")
chip("h100_pcie","NVIDIA H100 PCIe 80GB","nvidia","gpu","Hopper","sm_90","cuda",mem(80,2000,"HBM2e",5120),nv(90,114,1755,50,51,756,756,1513,1513),nvfeat(90,True,True),
     "NVIDIA H100 Tensor Core GPU datasheet (dense = half the sparse figures)"+CG%"9.0",match="h100 pcie")
chip("h100_nvl","NVIDIA H100 NVL 94GB","nvidia","gpu","Hopper","sm_90","cuda",mem(94,3900,"HBM3",6144),nv(90,132,1785,50,60,835.5,835.5,1670.5,1670.5),nvfeat(90,True,True),
     "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column (dense = half the sparse figures)"+CG%"9.0",match="h100 nvl")
chip("h200","NVIDIA H200 SXM 141GB","nvidia","gpu","Hopper","sm_90","cuda",mem(141,4800,"HBM3e",6016),nv(90,132,1980,60,67,989.5,989.5,1979,1979),nvfeat(90,True,True),
     "NVIDIA H200 Tensor Core GPU datasheet (dense = half the sparse figures)"+CG%"9.0"+"; L2 size and bus width as the CUDA driver reports them on an H200 (core/testdata/cuda_probe_h200.json)",match="h200")
chip("gh200","NVIDIA GH200 Grace Hopper Superchip (96GB HBM3)","nvidia","gpu","Hopper","sm_90","cuda",mem(96,4000,"HBM3",5120),nv(90,132,1980,50,67,989.5,989.5,1979,1979),
     dict(nvfeat(90,True,True),unified_memory=True),
     "NVIDIA GH200 Grace Hopper Superchip datasheet (dense = half the sparse figures)"+CG%"9.0",match="gh200")
b200=nv(100,148,0,0,75,2250,2250,4500,4500)
chip("b200","NVIDIA B200 180GB","nvidia","gpu","Blackwell","sm_100","cuda",mem(180,7700,"HBM3e",8192),b200,nvfeat(100,True,True),
     "NVIDIA HGX B200 datasheet, per GPU = 1/8 of the 8-GPU figures, dense = half the sparse figures"+CG%"10.0",match="b200")
# ---- AMD ----
def amd(cus,clock,l2,fp32,fp16,bf16,fp8,int8,l3=0):
    return {"warp_size":64,"num_compute_units":cus,"clock_mhz":clock,"max_threads_per_block":1024,"max_threads_per_cu":2048,"max_blocks_per_cu":32,
            "shared_mem_per_block_kb":64,"shared_mem_per_cu_kb":64,"l2_cache_mb":l2,"l3_cache_mb":l3,"registers_per_block":0,
            "peak_tflops_fp32":fp32,"peak_tflops_fp16":fp16,"peak_tflops_bf16":bf16,"peak_tflops_fp8":fp8,"peak_tflops_int8":int8}
def amdfeat(gen,fp8=False):
    return {"tensor_cores":True,"tensor_core_gen":gen,"fp8":fp8,"bf16":True,"fp16":True,"int8":True,"sparsity":fp8}
HIPG="; AMD ROCm HIP programming guide (LDS 64 KiB per CU, wavefront 64)"
chip("mi210","AMD Instinct MI210","amd","gpu","CDNA 2","gfx90a","hip",mem(64,1638.4,"HBM2e",4096),amd(104,1700,8,22.6,181,181,0,181),amdfeat(2),
     "AMD Instinct MI210 datasheet (FP32 vector)"+HIPG,match="mi210")
chip("mi250x","AMD Instinct MI250X","amd","gpu","CDNA 2","gfx90a","hip",mem(128,3276.8,"HBM2e",8192),amd(220,1700,16,47.9,383,383,0,383),amdfeat(2),
     "AMD Instinct MI250X datasheet (FP32 vector; one package = 2 GCDs, each a HIP device)"+HIPG,match="mi250x|mi250",logical=2)
chip("mi300x","AMD Instinct MI300X","amd","gpu","CDNA 3","gfx942","hip",mem(192,5300,"HBM3",8192),amd(304,2100,32,163.4,1307.4,1307.4,2614.9,2614.9,256),amdfeat(3,True),
     "AMD Instinct MI300X datasheet (dense)"+HIPG,match="mi300x")
chip("mi325x","AMD Instinct MI325X","amd","gpu","CDNA 3","gfx942","hip",mem(256,6000,"HBM3E",8192),amd(304,2100,32,163.4,1307.4,1307.4,2614.9,2614.9,256),amdfeat(3,True),
     "AMD Instinct MI325X datasheet (dense)"+HIPG,match="mi325x")
# ---- Intel GPUs ----
chip("max_1550","Intel Data Center GPU Max 1550","intel","gpu","Xe-HPC (Ponte Vecchio)","pvc","level_zero",mem(128,3276.8,"HBM2e",8192),
     {"warp_size":16,"num_compute_units":128,"clock_mhz":1600,"max_threads_per_block":1024,"shared_mem_per_block_kb":128,"shared_mem_per_cu_kb":128,"l2_cache_mb":408,
      "peak_tflops_fp32":52.4,"peak_tflops_fp16":838.9,"peak_tflops_bf16":838.9,"peak_tflops_int8":1677.7},
     {"tensor_cores":True,"bf16":True,"fp16":True,"int8":True},"Intel Data Center GPU Max 1550 product brief / ark.intel.com",match="gpu max 1550")
chip("arc_b580","Intel Arc B580","intel","gpu","Xe2-HPG (Battlemage)","bmg_g21","level_zero",mem(12,456,"GDDR6",192,False),
     {"warp_size":16,"num_compute_units":20,"clock_mhz":2670,"max_threads_per_block":1024,"l2_cache_mb":18,"peak_tflops_int8":233},
     {"tensor_cores":True,"bf16":True,"fp16":True,"int8":True},"Intel Arc B580 specifications, intel.com (peak INT8 233 TOPS)",match="arc b580|b580")
# ---- Huawei ----
chip("ascend_910","Huawei Ascend 910","huawei","npu","Da Vinci","ascend910","ascend",mem(32,1200,"HBM2",4096),
     {"num_compute_units":32,"peak_tflops_fp16":256,"peak_tflops_int8":512},{"tensor_cores":True,"fp16":True,"int8":True},
     "Huawei Ascend 910 announcement specifications (32 Da Vinci AI cores)",match="ascend 910|ascend910")
chip("ascend_910b","Huawei Ascend 910B","huawei","npu","Da Vinci","ascend910b","ascend",mem(64,1600,"HBM2e",0),
     {"peak_tflops_fp16":313,"peak_tflops_bf16":313,"peak_tflops_int8":626},{"tensor_cores":True,"fp16":True,"bf16":True,"int8":True},
     "Huawei Atlas 800T A2 training server specifications (per NPU); AI core count varies by 910B SKU",match="ascend 910b|ascend910b")
chip("ascend_310p","Huawei Ascend 310P","huawei","npu","Da Vinci","ascend310p","ascend",mem(24,204.8,"LPDDR4X",0,True),
     {"num_compute_units":8,"peak_tflops_fp16":70,"peak_tflops_int8":140},{"tensor_cores":True,"fp16":True,"int8":True},
     "Huawei Atlas 300I Pro inference card datasheet (8 Da Vinci AI cores)",match="ascend 310p|ascend310p")
# ---- MetaX ----
chip("metax_c500","MetaX C500","metax","gpu","MXC","mxc500","maca",mem(64,1800,"HBM2e",0),
     {"peak_tflops_fp16":280,"peak_tflops_bf16":280,"peak_tflops_int8":560},{"tensor_cores":True,"fp16":True,"bf16":True,"int8":True},
     "MetaX C500 product page (metax-tech.com)",match="c500")
# ---- Apple ----
def apple(cores,clock,fp32):
    return {"warp_size":32,"num_compute_units":cores,"clock_mhz":clock,"max_threads_per_block":1024,"shared_mem_per_block_kb":32,"peak_tflops_fp32":fp32}
AF={"fp16":True,"bf16":True,"int8":True,"unified_memory":True}
chip("m2_ultra","Apple M2 Ultra (76-core GPU)","apple","gpu","Apple GPU family 8","apple8","mps",mem(192,800,"LPDDR5",1024,False),apple(76,1398,27.2),AF,
     "Apple M2 Ultra technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables (32 KiB threadgroup memory)",match="m2 ultra")
chip("m3_max","Apple M3 Max (40-core GPU)","apple","gpu","Apple GPU family 9","apple9","mps",mem(128,400,"LPDDR5",512,False),apple(40,1398,14.3),AF,
     "Apple M3 Max technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables",match="m3 max")
chip("m4_max","Apple M4 Max (40-core GPU)","apple","gpu","Apple GPU family 9","apple9","mps",mem(128,546,"LPDDR5X",512,False),apple(40,1578,16.2),AF,
     "Apple M4 Max technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables",match="m4 max")
# ---- Google ----
chip("tpu_v4","Google Cloud TPU v4","google","tpu","TPU v4","v4","tpu",mem(32,1200,"HBM2",0),
     {"num_compute_units":2,"clock_mhz":1050,"peak_tflops_bf16":275,"peak_tflops_int8":275},{"tensor_cores":True,"bf16":True,"int8":True},
     "Google Cloud TPU v4 documentation (per chip: 2 TensorCores)",match="tpu v4")
chip("tpu_v5e","Google Cloud TPU v5e","google","tpu","TPU v5e","v5e","tpu",mem(16,819,"HBM2",0),
     {"num_compute_units":1,"peak_tflops_bf16":197,"peak_tflops_int8":394},{"tensor_cores":True,"bf16":True,"int8":True},
     "Google Cloud TPU v5e documentation (per chip: 1 TensorCore)",match="tpu v5e|tpu v5 lite|tpu v5litepod")
chip("tpu_v5p","Google Cloud TPU v5p","google","tpu","TPU v5p","v5p","tpu",mem(95,2765,"HBM2e",0),
     {"num_compute_units":2,"peak_tflops_bf16":459,"peak_tflops_int8":918},{"tensor_cores":True,"bf16":True,"int8":True},
     "Google Cloud TPU v5p documentation (per chip: 2 TensorCores)",match="tpu v5p|tpu v5")
# ---- Xilinx ----
chip("alveo_u250","AMD Xilinx Alveo U250","xilinx","fpga","UltraScale+","xcu250","fpga",mem(64,77,"DDR4",288,True),
     {"peak_tflops_int8":33.3},{"int8":True},"Xilinx Alveo U250 data center accelerator card data sheet (DS962)",match="alveo u250|u250")
# ---- AWS accelerators ----
chip("trainium2","AWS Trainium2","aws","dsa","NeuronCore-v3","trn2","nki",mem(96,2900,"HBM",0),
     {"num_compute_units":8,"peak_tflops_fp32":181,"peak_tflops_fp16":667,"peak_tflops_bf16":667,"peak_tflops_fp8":1299},
     {"tensor_cores":True,"fp8":True,"bf16":True,"fp16":True,"sparsity":True},"AWS Trainium2 architecture, AWS Neuron documentation (dense)",match="trainium2|trn2")
chip("trainium","AWS Trainium","aws","dsa","NeuronCore-v2","trn1","nki",mem(32,820,"HBM",0),
     {"num_compute_units":2,"peak_tflops_fp32":47.5,"peak_tflops_fp16":190,"peak_tflops_bf16":190,"peak_tflops_fp8":190},
     {"tensor_cores":True,"fp8":True,"bf16":True,"fp16":True},"AWS Trainium architecture, AWS Neuron documentation",match="trainium|trn1")
chip("inferentia2","AWS Inferentia2","aws","dsa","NeuronCore-v2","inf2","nki",mem(32,820,"HBM",0),
     {"num_compute_units":2,"peak_tflops_fp32":47.5,"peak_tflops_fp16":190,"peak_tflops_bf16":190,"peak_tflops_fp8":190,"peak_tflops_int8":190},
     {"tensor_cores":True,"fp8":True,"bf16":True,"fp16":True,"int8":True},"AWS Inferentia2 architecture, AWS Neuron documentation",match="inferentia2|inf2")
# ---- CPUs ----
def cpu(cores,boost,l1,l2mb,l3mb,simd):
    return {"warp_size":1,"num_compute_units":cores,"clock_mhz":boost,"l1_cache_kb":l1,"l2_cache_mb":l2mb,"l3_cache_mb":l3mb,"simd_width_bits":simd}
X86_512={"avx2":True,"avx512":True,"bf16":True,"int8":True}
chip("epyc_9654","AMD EPYC 9654","amd","cpu","Zen 4 (Genoa)","znver4","cpu",mem(6144,460.8,"DDR5-4800",768),cpu(96,3700,32,96,384,512),dict(X86_512),
     "AMD EPYC 9654 product specifications (amd.com): 96 cores, 1 MB L2 per core, 384 MB L3, 12 channels DDR5-4800",match="epyc 9654")
chip("epyc_9754","AMD EPYC 9754","amd","cpu","Zen 4c (Bergamo)","znver4","cpu",mem(6144,460.8,"DDR5-4800",768),cpu(128,3100,32,128,256,512),dict(X86_512),
     "AMD EPYC 9754 product specifications (amd.com): 128 cores, 1 MB L2 per core, 256 MB L3, 12 channels DDR5-4800",match="epyc 9754")
chip("epyc_9965","AMD EPYC 9965","amd","cpu","Zen 5c (Turin)","znver5","cpu",mem(6144,614.4,"DDR5-6400",768),cpu(192,3700,48,192,384,512),dict(X86_512),
     "AMD EPYC 9965 product specifications (amd.com): 192 cores, 1 MB L2 per core, 384 MB L3, 12 channels DDR5-6400",match="epyc 9965")
chip("xeon_8480","Intel Xeon Platinum 8480+","intel","cpu","Sapphire Rapids","sapphirerapids","cpu",mem(4096,307.2,"DDR5-4800",512),cpu(56,3800,48,112,105,512),
     dict(X86_512,amx=True,tensor_cores=True,fp16=True),
     "Intel Xeon Platinum 8480+ (ark.intel.com): 56 cores, 2 MB L2 per core, 105 MB L3, 8 channels DDR5-4800, AMX",match="xeon platinum 8480")
chip("xeon_6980p","Intel Xeon 6980P","intel","cpu","Granite Rapids","graniterapids","cpu",mem(3072,614.4,"DDR5-6400",768),cpu(128,3900,48,256,504,512),
     dict(X86_512,amx=True,tensor_cores=True,fp16=True),
     "Intel Xeon 6980P (ark.intel.com): 128 cores, 2 MB L2 per core, 504 MB L3, 12 channels DDR5-6400, AMX",match="xeon 6980p")
chip("graviton3","AWS Graviton3","aws","cpu","Neoverse V1","neoverse-v1","cpu",mem(512,307.2,"DDR5-4800",512),cpu(64,2600,64,64,32,256),
     {"neon":True,"sve":True,"bf16":True,"fp16":True,"int8":True},"AWS Graviton3 (aws.amazon.com/ec2/graviton): 64 Neoverse V1 cores, 256-bit SVE, 8 channels DDR5-4800",match="graviton3")
chip("graviton4","AWS Graviton4","aws","cpu","Neoverse V2","neoverse-v2","cpu",mem(768,537.6,"DDR5-5600",768),cpu(96,2800,64,192,36,128),
     {"neon":True,"sve":True,"bf16":True,"fp16":True,"int8":True},"AWS Graviton4 (aws.amazon.com/ec2/graviton): 96 Neoverse V2 cores, 2 MB L2 per core, 12 channels DDR5-5600",match="graviton4")
for c in chips:
    c["metadata"]["builtin"]="true"
text=json.dumps(chips,indent=1)
assert ')json"' not in text
print(len(chips))
open(__import__('os').path.join(__import__('os').path.dirname(__file__), '..', 'builtin_chips.cc'),'w').write('''// The chips written into every new database (migration version 2 of
// server/job_store.cc). Numbers are from the vendor datasheets named in each
// chip's metadata "source"; TFLOPS are dense (not sparse); 0 means the
// datasheet does not say. Generated from a catalog, in the JSON format of
// docs/chip-registry.md, so it goes through the same parser and validation
// as an import.
#include "core/builtin_chips.h"

#include "core/chip.h"

namespace yirage::core {
namespace {

constexpr char kBuiltinChipsJson[] = R"json(''' + text + ''')json";

}  // namespace

std::string_view BuiltinChipsJson() { return kBuiltinChipsJson; }

absl::StatusOr<std::vector<yirage::v1::Chip>> BuiltinChips() {
  return ParseChipListJson(BuiltinChipsJson());
}

}  // namespace yirage::core
''')
