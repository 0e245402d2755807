//! InitProducerId, versions 0–4: idempotent producers get a producer id
//! (unique for the life of the data directory) and epoch 0; a producer that
//! presents its id and epoch (v3+, KIP-360) gets the next epoch, which
//! starts its sequences again. A transactional id is refused until
//! transactions exist.

use std::rc::Rc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use crate::protocol::errors;
use crate::shard::{messages::AllocateProducerId, router, Shard};

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = (-1).into();
    resp.producer_epoch = -1;
    if let Some(id) = req.transactional_id.as_ref().filter(|id| !id.0.is_empty()) {
        log::warn!("InitProducerId with transactional id {:?}: transactions are not supported yet", id.0.as_str());
        resp.error_code = errors::INVALID_REQUEST;
        return resp;
    }
    let (given_id, given_epoch) = (req.producer_id.0, req.producer_epoch);
    if given_id >= 0 && (0..i16::MAX - 1).contains(&given_epoch) {
        resp.producer_id = given_id.into();
        resp.producer_epoch = given_epoch + 1;
        return resp;
    }
    match shard.ask(router::CONTROLLER, AllocateProducerId).await {
        Ok(Ok(id)) => {
            resp.producer_id = id.into();
            resp.producer_epoch = 0;
        }
        Ok(Err(e)) => {
            log::warn!("cannot allocate a producer id: {e}");
            resp.error_code = errors::COORDINATOR_NOT_AVAILABLE;
        }
        Err(_) => resp.error_code = errors::COORDINATOR_NOT_AVAILABLE,
    }
    resp
}
