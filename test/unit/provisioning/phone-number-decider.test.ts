import { type PhoneNumberData, type PhoneNumberEvent, phoneNumberDecider, type TemplateData } from '../../../src/commands/provisioning/phone-number/decider';
import { spec } from '../../support/decider';

const number: PhoneNumberData = {
  companyId: 101, numberId: 21, phoneNumberId: '109876543210001', displayPhoneNumber: '+54 9 11 4321-0000', verifiedName: 'Clinica Norte',
  businessName: 'Clinica Norte SA', isPrimary: true, messagingLimitTier: 'TIER_250', qualityRating: 'GREEN',
};
const reminder: TemplateData = {
  companyId: 101, numberId: 21, templateId: 901, name: 'appointment_reminder', language: 'es', category: 'UTILITY', status: 'APPROVED',
  variables: [{ name: 'patient_name', type: 'TEXT', position: 1, isRequired: true, component: 'BODY' }],
  buttons: [{ type: 'URL', text: 'Ver turno', url: 'https://clinicanorte.example/t/{{1}}' }],
};
const promo: TemplateData = { ...reminder, templateId: 902, name: 'promo_checkup', category: 'MARKETING', status: 'PAUSED', variables: [], buttons: [] };

const registered: PhoneNumberEvent[] = [
  { type: 'PhoneNumberRegistered', data: number },
  { type: 'TemplateRegistered', data: reminder },
  { type: 'TemplateRegistered', data: promo },
];
const provision = (n = number, templates = [reminder, promo]) => ({ type: 'ProvisionPhoneNumber' as const, data: { number: n, templates } });

describe('phone number decider: ProvisionPhoneNumber', () => {
  it('given nothing, registers the number and its templates', () => {
    spec(phoneNumberDecider).given([]).when(provision()).then(registered);
  });

  it('given the same state, decides nothing', () => {
    spec(phoneNumberDecider).given(registered).when(provision()).then([]);
  });

  it('a tier change is MessagingTierChanged only', () => {
    spec(phoneNumberDecider).given(registered).when(provision({ ...number, messagingLimitTier: 'TIER_1000' }))
      .then([{ type: 'MessagingTierChanged', data: { companyId: 101, numberId: 21, tier: 'TIER_1000' } }]);
  });

  it('a rating change is QualityRatingChanged only', () => {
    spec(phoneNumberDecider).given(registered).when(provision({ ...number, qualityRating: 'RED' }))
      .then([{ type: 'QualityRatingChanged', data: { companyId: 101, numberId: 21, rating: 'RED' } }]);
  });

  it('details change: PhoneNumberDetailsChanged with the current tier, then the tier event', () => {
    spec(phoneNumberDecider).given(registered).when(provision({ ...number, verifiedName: 'Clinica Norte SA', messagingLimitTier: 'TIER_50' }))
      .then([
        { type: 'PhoneNumberDetailsChanged', data: { ...number, verifiedName: 'Clinica Norte SA' } },
        { type: 'MessagingTierChanged', data: { companyId: 101, numberId: 21, tier: 'TIER_50' } },
      ]);
  });

  it('a template status change is TemplateStatusChanged only', () => {
    spec(phoneNumberDecider).given(registered).when(provision(number, [reminder, { ...promo, status: 'APPROVED' }]))
      .then([{ type: 'TemplateStatusChanged', data: { companyId: 101, numberId: 21, templateId: 902, status: 'APPROVED' } }]);
  });

  it('a content change is TemplateChanged with the current status; a status change follows', () => {
    const edited = { ...promo, variables: [{ name: 'discount', type: 'CURRENCY' as const, position: 1, isRequired: true, component: 'BODY' as const }], status: 'PENDING' as const };
    spec(phoneNumberDecider).given(registered).when(provision(number, [reminder, edited]))
      .then([
        { type: 'TemplateChanged', data: { ...edited, status: 'PAUSED' } },
        { type: 'TemplateStatusChanged', data: { companyId: 101, numberId: 21, templateId: 902, status: 'PENDING' } },
      ]);
  });

  it('after status events, the folded status is compared (no repeated change)', () => {
    spec(phoneNumberDecider)
      .given([...registered, { type: 'TemplateStatusChanged', data: { companyId: 101, numberId: 21, templateId: 902, status: 'APPROVED' } },
        { type: 'MessagingTierChanged', data: { companyId: 101, numberId: 21, tier: 'TIER_1000' } }])
      .when(provision({ ...number, messagingLimitTier: 'TIER_1000' }, [reminder, { ...promo, status: 'APPROVED' }]))
      .then([]);
  });

  it('templates left out are kept (no event)', () => {
    spec(phoneNumberDecider).given(registered).when(provision(number, [])).then([]);
  });

  it('rejects a number registered to another company', () => {
    spec(phoneNumberDecider).given(registered).when(provision({ ...number, companyId: 202 }, [])).thenThrows('NUMBER_OF_ANOTHER_COMPANY');
  });

  it('rejects a template naming another number', () => {
    spec(phoneNumberDecider).given([]).when(provision(number, [{ ...reminder, numberId: 22 }])).thenThrows('NUMBER_MISMATCH');
  });
});
