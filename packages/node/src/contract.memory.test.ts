import { defineContractSuite, memoryTestStore, serviceTarget } from "@channelkit/testkit";
import { serve } from "./serve.js";

defineContractSuite(serviceTarget({ name: "node:http + memory", store: memoryTestStore, listen: (service) => serve(service, { port: 0 }) }));
